"""Rebuild data/kjv.txt from Debian's bible-kjv packages (run on Debian or Ubuntu; needs apt-get).

    python data/make_kjv.py            # writes data/kjv.txt next to this script

The text package holds the King James Version in the `bible` program's own compressed format
(bible.data, "EC02Compressed Data File"), not as plain text, so the program itself (package
bible-kjv) prints it: for each book taken, `bible -p DIR BOOK1:1-BOOK999:999`, its default
("pretty-printed") form: a heading line "Book chapter" before each chapter, then the verses,
numbered and wrapped at 79 columns. Trailing spaces are stripped; the books are joined in order.
"""
import glob
import os
import subprocess
import sys
import tempfile

BOOKS = ["gen", "exo", "ruth", "job", "ps", "prov", "eccl", "song",
         "mat", "mark", "luke", "john", "acts"]     # narrative, poetry, gospels: 1.45 MB of 4.4 MB


def book(bible, data_dir, name):
    """One book as the `bible` program prints it, trailing spaces stripped."""
    text = subprocess.run([bible, "-p", data_dir, f"{name}1:1-{name}999:999"], stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, check=True,
                          env={**os.environ, "COLUMNS": "80"}).stdout     # it wraps at COLUMNS - 1
    return "\n".join(line.rstrip() for line in text.strip("\n").splitlines()) + "\n"


def main():
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "kjv.txt")
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(["apt-get", "download", "bible-kjv", "bible-kjv-text"], cwd=tmp, check=True)
        for deb in glob.glob(os.path.join(tmp, "*.deb")):
            subprocess.run(["dpkg-deb", "-x", deb, os.path.join(tmp, "root")], check=True)
        bible, data_dir = os.path.join(tmp, "root/usr/bin/bible"), os.path.join(tmp, "root/usr/lib")
        text = "\n".join(book(bible, data_dir, name) for name in BOOKS)
    with open(out, "w", encoding="utf-8", newline="\n") as f:
        f.write(text)
    print(f"wrote {out}: {len(text):,} characters, {len(set(text))} distinct", file=sys.stderr)


if __name__ == "__main__":
    main()
