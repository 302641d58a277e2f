# The default job, in one place: sourced by launch/common.sh (the
# Scheduler/Server/Worker scripts) and launch/slurm/pstrain-srun.sh, so that
# every launcher starts the same job unless told otherwise. POSIX sh.
# The config (PSTRAIN_CONFIG, relative to the checkout or the install's
# share/pstrain): a node without one has no model to train and exits 2.
PSTRAIN_DEFAULT_CONFIG=configs/lenet_fashion_mnist.yaml
PSTRAIN_DEFAULT_SERVERS=2
PSTRAIN_DEFAULT_WORKERS=2
PSTRAIN_DEFAULT_SCHED_PORT=8081
