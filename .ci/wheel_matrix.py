"""Does every package of requirements.txt install from a wheel on each supported platform and Python?

    python .ci/wheel_matrix.py [--pythons 3.11 3.15] [--platforms linux-x86_64 ...] [--lock FILE]

For each target, the lock's lines whose environment markers hold there (evaluated for that
target, not for this interpreter, which is what pip's --platform alone would do) go to
`pip install --dry-run --only-binary=:all: --no-deps --platform ... --python-version ...`; the
table says ok or the first packages that have no wheel. Needs the package index; a few minutes.
"""
import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from course_lib.doctor import read_pins  # noqa: E402  (so: run it in the course's environment)

LOCK = ROOT / "requirements.txt"
# name -> (pip's --platform tags, the marker environment of such a machine)
PLATFORMS = {
    "linux-x86_64": ([f"manylinux_2_{m}_x86_64" for m in range(17, 29)] + ["manylinux2014_x86_64"],
                     {"sys_platform": "linux", "platform_machine": "x86_64", "os_name": "posix",
                      "platform_system": "Linux"}),
    "linux-aarch64": ([f"manylinux_2_{m}_aarch64" for m in range(17, 29)] + ["manylinux2014_aarch64"],
                      {"sys_platform": "linux", "platform_machine": "aarch64", "os_name": "posix",
                       "platform_system": "Linux"}),
    "macos-arm64": ([f"macosx_{v}_0_arm64" for v in range(11, 15)] +
                    [f"macosx_{v}_0_universal2" for v in range(11, 15)] + ["macosx_10_9_universal2"],
                    {"sys_platform": "darwin", "platform_machine": "arm64", "os_name": "posix",
                     "platform_system": "Darwin"}),
    # not supported (book/setup.md, Platforms): in the table only when asked for
    "macos-x86_64": ([f"macosx_{v}_0_x86_64" for v in range(11, 15)] + [f"macosx_10_{v}_x86_64" for v in (9, 13, 15)],
                     {"sys_platform": "darwin", "platform_machine": "x86_64", "os_name": "posix",
                      "platform_system": "Darwin"}),
    "windows-amd64": (["win_amd64"], {"sys_platform": "win32", "platform_machine": "AMD64", "os_name": "nt",
                                      "platform_system": "Windows"}),
}
PYTHONS = ["3.11", "3.12", "3.13", "3.14", "3.15"]
SUPPORTED = ["linux-x86_64", "linux-aarch64", "macos-arm64", "windows-amd64"]


def missing_wheels(platform: str, python: str, lock: Path = LOCK) -> list[str]:
    """The pins that pip finds no wheel for on this target (empty when every one has one)."""
    tags, machine = PLATFORMS[platform]
    environment = {**machine, "python_version": python, "python_full_version": f"{python}.0",
                   "implementation_name": "cpython", "platform_python_implementation": "CPython"}
    pins = [f"{name}=={version}" for name, version in read_pins(lock, environment).items()]
    flags = [f"--platform={tag}" for tag in tags]
    with tempfile.TemporaryDirectory() as target:
        done = subprocess.run([sys.executable, "-m", "pip", "install", "--dry-run", "--quiet", "--no-deps",
                               "--only-binary=:all:", "--ignore-installed", "--target", target,
                               "--python-version", python, "--implementation", "cp", *flags, *pins],
                              capture_output=True, text=True)
    if done.returncode == 0:
        return []
    return [line for line in done.stderr.splitlines() if "No matching distribution" in line] or \
        [done.stderr.strip().splitlines()[-1]]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pythons", nargs="+", default=PYTHONS)
    parser.add_argument("--platforms", nargs="+", default=SUPPORTED, choices=list(PLATFORMS))
    parser.add_argument("--lock", type=Path, default=LOCK, help="the requirements file to check")
    args = parser.parse_args(argv)
    failed = 0
    print(f"| platform | {' | '.join(args.pythons)} |\n|---|{'---|' * len(args.pythons)}", flush=True)
    for platform in args.platforms:
        cells = []
        for python in args.pythons:
            missing = missing_wheels(platform, python, args.lock)
            failed += bool(missing)
            cells.append("ok" if not missing else "fails: " + "; ".join(missing)[:200])
        print(f"| {platform} | {' | '.join(cells)} |", flush=True)
    total = len(args.pythons) * len(args.platforms)
    print(f"{total - failed} of {total} targets install from wheels")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
