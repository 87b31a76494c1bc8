# Every dependency comes from a Debian 12 package. When one is missing,
# configuration stops and names the package to install (or run
# tools/dev/install-deps.sh, which installs them all).
find_package(PkgConfig QUIET)

function(siphon_missing what package)
  message(FATAL_ERROR
    "${what} not found. Install the Debian package '${package}' "
    "(apt-get install ${package}), or run tools/dev/install-deps.sh as root.")
endfunction()

if(NOT PkgConfig_FOUND)
  siphon_missing("pkg-config" "pkg-config")
endif()

find_package(Threads REQUIRED)

find_package(fmt CONFIG QUIET)
if(NOT fmt_FOUND)
  siphon_missing("fmt" "libfmt-dev")
endif()

find_package(Boost 1.74 CONFIG QUIET)
if(NOT Boost_FOUND)
  siphon_missing("Boost (Asio, Intrusive)" "libboost-dev")
endif()

macro(siphon_pkg target module package)
  pkg_check_modules(${target} QUIET IMPORTED_TARGET ${module})
  if(NOT ${target}_FOUND)
    siphon_missing("${module} (pkg-config)" "${package}")
  endif()
endmacro()

# JSON parsing (admin socket requests, tools, tests).
find_package(nlohmann_json 3 CONFIG QUIET)
if(NOT nlohmann_json_FOUND)
  siphon_missing("nlohmann-json" "nlohmann-json3-dev")
endif()

# cephx and secure mode: AES-CBC, AES-GCM, HMAC-SHA256 (msgr/auth).
find_package(OpenSSL 3 QUIET COMPONENTS Crypto)
if(NOT OpenSSL_FOUND)
  siphon_missing("OpenSSL (libcrypto)" "libssl-dev")
endif()
siphon_pkg(ISAL libisal libisal-dev)
siphon_pkg(URING liburing liburing-dev)
siphon_pkg(IBVERBS libibverbs libibverbs-dev)
siphon_pkg(RDMACM librdmacm librdmacm-dev)

if(SIPHON_BUILD_TESTS)
  find_package(GTest CONFIG QUIET)
  if(NOT GTest_FOUND)
    siphon_missing("GoogleTest" "libgtest-dev libgmock-dev")
  endif()
endif()
if(SIPHON_BUILD_BENCHMARKS)
  find_package(benchmark CONFIG QUIET)
  if(NOT benchmark_FOUND)
    siphon_missing("Google Benchmark" "libbenchmark-dev")
  endif()
endif()
find_package(Python3 COMPONENTS Interpreter QUIET)
if(NOT Python3_FOUND)
  siphon_missing("python3" "python3")
endif()
