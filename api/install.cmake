# api/install.cmake — the public C API as libraries, and what `cmake --install` puts
# in place: include/onnxtrain.h, libonnxtrain.so.MAJOR.MINOR.PATCH (SONAME
# libonnxtrain.so.MAJOR) exporting only onnxtrain_* (api/onnxtrain.map), libonnxtrain.a
# (every object of onnxtrain_lib and the ONNX protobuf code), onnxtrain.pc and the
# CMake package onnxtrain::onnxtrain / onnxtrain::onnxtrain_static. The CUDA module is
# installed beside the library, where kernels/backend_select.c looks for it.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

# The header's version macros are the library's version: the SONAME, the .pc file and
# the CMake package take the project's, so the two must agree.
foreach(part MAJOR MINOR PATCH)
  file(STRINGS ${CMAKE_SOURCE_DIR}/include/onnxtrain.h line REGEX "^#define ONNXTRAIN_VERSION_${part} ")
  string(REGEX REPLACE ".* ([0-9]+)$" "\\1" v "${line}")
  if(NOT v STREQUAL "${PROJECT_VERSION_${part}}")
    message(FATAL_ERROR "include/onnxtrain.h: ONNXTRAIN_VERSION_${part} ${v}, the project's version is ${PROJECT_VERSION}")
  endif()
endforeach()

set(OT_API_MAP ${CMAKE_SOURCE_DIR}/api/onnxtrain.map)
file(GLOB OT_API_SOURCES CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/api/*.c)
add_library(onnxtrain_shared SHARED ${OT_API_SOURCES})
target_link_libraries(onnxtrain_shared PRIVATE onnxtrain_lib)
target_compile_options(onnxtrain_shared PRIVATE "$<$<COMPILE_LANGUAGE:C>:-fvisibility=hidden>")
target_link_options(onnxtrain_shared PRIVATE "LINKER:--version-script=${OT_API_MAP}" "LINKER:--exclude-libs,ALL")
if(NOT OT_SANITIZE)
  target_link_options(onnxtrain_shared PRIVATE "LINKER:-z,defs")
endif()
set_target_properties(onnxtrain_shared PROPERTIES
  OUTPUT_NAME onnxtrain
  VERSION ${PROJECT_VERSION}
  SOVERSION ${PROJECT_VERSION_MAJOR}
  LINK_DEPENDS ${OT_API_MAP}
  # $ORIGIN: the CUDA module installed beside the library is found by the loader's
  # search kernels/backend_select.c falls back to (a dlopen uses the caller's RUNPATH);
  # the OpenMP OpenBLAS lives outside the loader's default folders (see above)
  BUILD_RPATH "$ORIGIN"
  INSTALL_RPATH "$ORIGIN"
  INSTALL_RPATH_USE_LINK_PATH ON)

add_library(onnxtrain_static STATIC $<TARGET_OBJECTS:onnxtrain_lib> $<TARGET_OBJECTS:ot_onnx_proto>)
set_target_properties(onnxtrain_static PROPERTIES OUTPUT_NAME onnxtrain LINKER_LANGUAGE C)

# `pip install .` (pyproject.toml, scikit-build-core sets SKBUILD): the Python package's
# own copy of the library, its header (the binding reads its declarations) and the CUDA
# module, in the package folder; component python only, so the wheel holds nothing else.
if(SKBUILD)
  # one file under its SONAME (a wheel has no symlinks), with the build tree's RUNPATH
  install(PROGRAMS $<TARGET_FILE:onnxtrain_shared> DESTINATION onnxtrain RENAME libonnxtrain.so.${PROJECT_VERSION_MAJOR}
          COMPONENT python)
  install(FILES ${CMAKE_SOURCE_DIR}/include/onnxtrain.h DESTINATION onnxtrain COMPONENT python)
  if(OT_HAVE_CUDA)
    add_dependencies(onnxtrain_shared onnxtrain_cuda) # pyproject builds onnxtrain_shared only
    install(PROGRAMS $<TARGET_FILE:onnxtrain_cuda> DESTINATION onnxtrain COMPONENT python)
  endif()
endif()

install(FILES ${CMAKE_SOURCE_DIR}/include/onnxtrain.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(TARGETS onnxtrain_shared onnxtrain_static
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
if(OT_HAVE_CUDA)
  install(TARGETS onnxtrain_cuda LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
endif()

# What a static link needs besides libonnxtrain.a (full paths or -l flags).
set(OT_STATIC_DEPS "")
set(OT_MPI_LIBS "")
if(OT_HAVE_MPI)
  set(OT_MPI_LIBS ${MPI_C_LIBRARIES})
endif()
foreach(lib ${BLAS_LIBRARIES} ${OT_GLPK_LIBRARY} ${OT_CBC_LIBS} ${OT_DNNL_LIB} ${OT_MPI_LIBS})
  if(lib AND NOT lib MATCHES "-NOTFOUND$")
    string(APPEND OT_STATIC_DEPS " ${lib}")
  endif()
endforeach()
string(APPEND OT_STATIC_DEPS " -lprotobuf-c -fopenmp -lm")
if(OT_HAVE_CUDA)
  string(APPEND OT_STATIC_DEPS " -ldl")
endif()
# relocatable: the prefix is found from the .pc file's own folder, so an install with
# `cmake --install --prefix P` works wherever P is
file(RELATIVE_PATH OT_PC_TO_PREFIX /p/${CMAKE_INSTALL_LIBDIR}/pkgconfig /p)
configure_file(${CMAKE_SOURCE_DIR}/api/onnxtrain.pc.in ${CMAKE_BINARY_DIR}/onnxtrain.pc @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/onnxtrain.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

configure_package_config_file(${CMAKE_SOURCE_DIR}/api/onnxtrainConfig.cmake.in
  ${CMAKE_BINARY_DIR}/onnxtrainConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/onnxtrain
  PATH_VARS CMAKE_INSTALL_INCLUDEDIR CMAKE_INSTALL_LIBDIR)
write_basic_package_version_file(${CMAKE_BINARY_DIR}/onnxtrainConfigVersion.cmake
  COMPATIBILITY SameMajorVersion)
install(FILES ${CMAKE_BINARY_DIR}/onnxtrainConfig.cmake ${CMAKE_BINARY_DIR}/onnxtrainConfigVersion.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/onnxtrain)
