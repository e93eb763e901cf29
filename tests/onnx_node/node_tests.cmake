# node_tests.cmake — builds tests/onnx_node/run_node_tests and registers ONNX's own
# backend node tests (shipped in pip's onnx package) as the ctest entry onnx_node_tests.
# Included from tests/CMakeLists.txt.
#
# The data folder is found by asking `python3` (the pip interpreter, not Debian's
# /usr/bin/python3, whose python3-onnx lacks the test data) at configure time; override
# with -DOT_ONNX_NODE_DATA=/path/to/onnx/backend/test/data/node. Without it the test is
# still registered and reports SKIP (exit 77) with the install command.
set(OT_ONNX_NODE_DATA "" CACHE PATH "onnx/backend/test/data/node folder (empty: ask python3)")
set(_ot_node_data "${OT_ONNX_NODE_DATA}")
if(NOT _ot_node_data)
  find_program(OT_PIP_PYTHON3 NAMES python3)
  if(OT_PIP_PYTHON3)
    # -I: the source tree has an onnx/ folder that would shadow the package.
    execute_process(
      COMMAND ${OT_PIP_PYTHON3} -I -c
              "import os, onnx; print(os.path.join(os.path.dirname(onnx.__file__), 'backend', 'test', 'data', 'node'))"
      OUTPUT_VARIABLE _ot_node_data OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE _ot_rc)
    if(NOT _ot_rc EQUAL 0 OR NOT IS_DIRECTORY "${_ot_node_data}")
      set(_ot_node_data "")
    endif()
  endif()
endif()
if(_ot_node_data)
  message(STATUS "onnxtrain: ONNX node tests from ${_ot_node_data}")
else()
  message(STATUS "onnxtrain: ONNX node test data not found (python3 -m pip install onnx==1.17.0); onnx_node_tests will skip")
endif()

add_executable(run_node_tests ${CMAKE_CURRENT_LIST_DIR}/run_node_tests.c)
target_link_libraries(run_node_tests PRIVATE onnxtrain_lib) # CPU only; never loads the CUDA module
set(_ot_node_args "${_ot_node_data}")
if(EXISTS ${CMAKE_CURRENT_LIST_DIR}/known_failures.txt)
  list(APPEND _ot_node_args --known-failures ${CMAKE_CURRENT_LIST_DIR}/known_failures.txt)
endif()
add_test(NAME onnx_node_tests COMMAND run_node_tests ${_ot_node_args})
set_tests_properties(onnx_node_tests PROPERTIES SKIP_RETURN_CODE 77 ENVIRONMENT "OMP_NUM_THREADS=1" TIMEOUT 900)

# The committed sample fixtures (samples/NAME/output_b*.npy) checked against ONNX's own
# reference evaluator from the same pip onnx package: independent of PyTorch and of
# onnxtrain, so it catches a stale or mis-exported sample.
if(_ot_node_data AND OT_PIP_PYTHON3)
  add_test(NAME check_samples COMMAND ${OT_PIP_PYTHON3} -I ${CMAKE_SOURCE_DIR}/samples/check_samples.py)
  set_tests_properties(check_samples PROPERTIES TIMEOUT 120)
endif()
