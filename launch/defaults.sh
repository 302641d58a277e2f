# The default job shape, in one place: sourced by launch/common.sh (the
# Scheduler/Server/Worker scripts) and launch/slurm/pstrain-srun.sh, so that
# every launcher starts the same job unless told otherwise. POSIX sh.
PSTRAIN_DEFAULT_SERVERS=2
PSTRAIN_DEFAULT_WORKERS=2
PSTRAIN_DEFAULT_SCHED_PORT=8081
