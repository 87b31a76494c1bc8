#!/usr/bin/env python3
"""Configuration stops with the Debian package to install when a dependency
is missing (issue 2, item 2; cmake/SiphonDependencies.cmake).

  missing_deps_test.py CMAKE SOURCE_DIR

Each case configures the tree in a scratch directory with one dependency
hidden from CMake and expects a failed configure whose message names the
package and the install script."""
import os
import shutil
import subprocess
import sys
import tempfile

cmake, src = sys.argv[1], sys.argv[2]
# (what is hidden, extra cmake arguments, extra environment, package named)
CASES = [
    ("fmt", ["-DCMAKE_DISABLE_FIND_PACKAGE_fmt=ON"], {}, "libfmt-dev"),
    ("Boost", ["-DCMAKE_DISABLE_FIND_PACKAGE_Boost=ON"], {}, "libboost-dev"),
    ("GoogleTest", ["-DCMAKE_DISABLE_FIND_PACKAGE_GTest=ON"], {}, "libgtest-dev libgmock-dev"),
    ("Google Benchmark", ["-DCMAKE_DISABLE_FIND_PACKAGE_benchmark=ON", "-DSIPHON_BUILD_BENCHMARKS=ON"], {},
     "libbenchmark-dev"),
    # No .pc file is visible: the first pkg-config module asked for is ISA-L.
    ("every pkg-config module", [], {"PKG_CONFIG_LIBDIR": "/nonexistent", "PKG_CONFIG_PATH": ""}, "libisal-dev"),
]
failures = 0
for what, args, env_extra, package in CASES:
    build = tempfile.mkdtemp(prefix="siphon-missing-dep-")
    try:
        env = dict(os.environ, **env_extra)
        p = subprocess.run([cmake, "-S", src, "-B", build, "-G", "Ninja", *args], env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=120)
        out = " ".join(p.stdout.decode().split())  # CMake wraps long messages
        want = f"Install the Debian package '{package}'"
        ok = p.returncode != 0 and want in out and "tools/dev/install-deps.sh" in out
        print(f"{'PASS' if ok else 'FAIL'} {what} hidden -> names '{package}'", flush=True)
        if not ok:
            failures += 1
            print(f"  exit {p.returncode}; output:\n{p.stdout.decode()[-1500:]}")
    finally:
        shutil.rmtree(build, ignore_errors=True)
print(f"{len(CASES) - failures} passed, {failures} failed")
sys.exit(1 if failures else 0)
