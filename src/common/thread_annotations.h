// Clang's thread-safety annotations (-Wthread-safety): which mutex guards a
// member, which a function needs held or must not hold. Clang checks them at
// compile time; other compilers see nothing (the macros expand to nothing).
// The clang build of tests/fuzz compiles with -Werror=thread-safety, so a
// GUARDED_BY member touched without its lock fails that build.
//
// std::mutex carries no annotations in libstdc++: annotated state is guarded
// by the Mutex of src/common/mutex.h. Names as in Abseil and the Clang
// manual (clang.llvm.org/docs/ThreadSafetyAnalysis.html).
#pragma once

#if defined(__clang__)
#define PSTRAIN_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define PSTRAIN_THREAD_ANNOTATION(x)
#endif

// A class that is a lock (Mutex).
#define CAPABILITY(x) PSTRAIN_THREAD_ANNOTATION(capability(x))
// A class that holds a lock for its scope (MutexLock).
#define SCOPED_CAPABILITY PSTRAIN_THREAD_ANNOTATION(scoped_lockable)
// A member read or written only with `x` held.
#define GUARDED_BY(x) PSTRAIN_THREAD_ANNOTATION(guarded_by(x))
// A pointer whose pointee is read or written only with `x` held.
#define PT_GUARDED_BY(x) PSTRAIN_THREAD_ANNOTATION(pt_guarded_by(x))
// A function (or lambda) called only with these held.
#define REQUIRES(...) PSTRAIN_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
// A function called only without these held (it takes them itself).
#define EXCLUDES(...) PSTRAIN_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
// A function that takes, or lets go of, these (no argument: `this`).
#define ACQUIRE(...) PSTRAIN_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#define RELEASE(...) PSTRAIN_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
// A function that takes these when it returns `ok`.
#define TRY_ACQUIRE(...) PSTRAIN_THREAD_ANNOTATION(try_acquire_capability(__VA_ARGS__))
// A function that tells the analysis `x` is held from here on (a check).
#define ASSERT_CAPABILITY(x) PSTRAIN_THREAD_ANNOTATION(assert_capability(x))
// A function that returns the lock `x` (an accessor).
#define RETURN_CAPABILITY(x) PSTRAIN_THREAD_ANNOTATION(lock_returned(x))
// A function the analysis skips: its locking is right for reasons it cannot
// follow; say those reasons next to it.
#define NO_THREAD_SAFETY_ANALYSIS PSTRAIN_THREAD_ANNOTATION(no_thread_safety_analysis)
