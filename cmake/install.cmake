# cmake --install: the binary, and what a job needs next to it.
#   <prefix>/bin/pstrain
#   <prefix>/lib/pstrain/libpstrain_cuda.so   the CUDA module, in a CUDA build
#                                       (lib/<multiarch>/pstrain where
#                                       GNUInstallDirs says so); the binary
#                                       finds it relative to itself
#   <prefix>/share/pstrain/launch/...   the launch scripts (find_binary.sh
#                                       finds <prefix>/bin/pstrain from there)
#   <prefix>/share/pstrain/configs/...  the example configs (relative data
#                                       paths resolve under share/pstrain/)
#   <prefix>/share/doc/pstrain/         README.md and LICENSE
# The layout keeps launch/ and configs/ side by side as in the checkout, so
# the scripts and configs work the same installed or not.
include(GNUInstallDirs)
# The installed binary keeps the run path it was linked with (CUDA's lib
# directory in a CUDA build, nothing otherwise): it is computed once at link
# time, so install has nothing to rewrite (rewriting the build's run path
# failed on a CUDA build: "file RPATH_CHANGE could not write new RPATH").
set_target_properties(pstrain PROPERTIES BUILD_WITH_INSTALL_RPATH ON INSTALL_RPATH_USE_LINK_PATH ON)
install(TARGETS pstrain RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
if(TARGET pstrain_cuda)
  # The module keeps its run path (CUDA's lib directory) likewise.
  set_target_properties(pstrain_cuda PROPERTIES BUILD_WITH_INSTALL_RPATH ON
                                                INSTALL_RPATH_USE_LINK_PATH ON)
  install(TARGETS pstrain_cuda LIBRARY DESTINATION ${PSTRAIN_GPU_MODULE_DIR})
endif()
install(DIRECTORY ${PROJECT_SOURCE_DIR}/launch/ DESTINATION ${CMAKE_INSTALL_DATADIR}/pstrain/launch
        USE_SOURCE_PERMISSIONS
        PATTERN "build.sh" EXCLUDE)  # builds a checkout; nothing to build here
install(DIRECTORY ${PROJECT_SOURCE_DIR}/configs/ DESTINATION ${CMAKE_INSTALL_DATADIR}/pstrain/configs)
install(FILES ${PROJECT_SOURCE_DIR}/README.md ${PROJECT_SOURCE_DIR}/LICENSE DESTINATION ${CMAKE_INSTALL_DOCDIR})
