# plan_5000_libs.sh — sourced by the plan_5000 scripts: plan_5000_libs BUILD prints the
# libraries a bench program linked against BUILD's libonnxtrain_lib.a needs, as that
# build links them: the optional ones it found (GLPK, CBC, oneDNN, from CMake's cache)
# and its own OpenBLAS with an rpath to it. A bare -lopenblas resolves at run time to
# the system's default libopenblas.so.0, on Debian the pthreads build, whose server
# thread spins in sched_yield for a while after the library loads: the planner calls
# no BLAS, but that spin counted in the programs' process CPU time while onnxtrain
# itself, linked to the OpenMP build, starts no thread when it plans. The programs call
# no BLAS either, so the linker would drop the library (--as-needed) and CBC's LAPACK
# would load the default one after all: it is named as needed explicitly.
plan_5000_libs() {
  blas=$(sed -n 's/^OT_OPENBLAS_OPENMP:FILEPATH=\(\/.*\)$/\1/p' "$1/CMakeCache.txt")
  if [ -n "$blas" ]; then echo "-Wl,--no-as-needed $blas -Wl,--as-needed -Wl,-rpath,$(dirname "$blas")"; else echo -lopenblas; fi
  sed -n 's/^OT_\(GLPK_LIBRARY\|CBC_LIB_[A-Za-z]*\|DNNL_LIB\):FILEPATH=\(\/.*\)$/\2/p' "$1/CMakeCache.txt"
}
