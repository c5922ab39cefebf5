#!/usr/bin/env python3
"""Checks the relative links of every tracked Markdown file: the target file
exists and, for a `#anchor`, a heading of the target page has that anchor
(GitHub's slug rule: lower case, punctuation dropped, spaces to hyphens, a
repeated heading gets -1, -2, ...). Prints each broken link; exits 1 if any."""
import re
import subprocess
import sys
from pathlib import Path

LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
HEADING = re.compile(r"(#{1,6})\s+(.*?)\s*#*\s*$")


def lines_outside_code(text):
    fence = None
    for number, line in enumerate(text.splitlines(), 1):
        marker = re.match(r"\s*(```|~~~)", line)
        if marker:
            fence = None if fence == marker.group(1) else fence or marker.group(1)
            continue
        if fence is None:
            yield number, line


def anchors(path, cache={}):
    if path not in cache:
        seen, found = {}, set()
        for _, line in lines_outside_code(path.read_text()):
            heading = HEADING.match(line)
            if not heading:
                found.update(re.findall(r"<a\s+(?:name|id)=\"([^\"]+)\"", line))
                continue
            text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading.group(2))
            slug = re.sub(r"[^\w\- ]", "", text.lower()).replace(" ", "-")
            count = seen.get(slug, 0)
            seen[slug] = count + 1
            found.add(f"{slug}-{count}" if count else slug)
        cache[path] = found
    return cache[path]


def main():
    root = Path(__file__).resolve().parent.parent
    files = subprocess.run(["git", "ls-files", "--cached", "--others",
                            "--exclude-standard", "*.md"], cwd=root, check=True,
                           capture_output=True, text=True).stdout.split()
    broken = 0
    for name in files:
        page = root / name
        for number, line in lines_outside_code(page.read_text()):
            spans = [m.span() for m in re.finditer(r"`[^`]*`", line)]
            for link in LINK.finditer(line):
                if any(start < link.start() < end for start, end in spans):
                    continue  # an example inside a code span
                target = link.group(1)
                if re.match(r"[a-z][a-z0-9+.-]*:", target):
                    continue
                file_part, _, anchor = target.partition("#")
                dest = (page.parent / file_part).resolve() if file_part else page
                if not dest.exists():
                    problem = "no such file"
                elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
                    problem = "no such heading"
                else:
                    continue
                print(f"{name}:{number}: {target}: {problem}")
                broken += 1
    print(f"doc links: {len(files)} Markdown files, {broken} broken")
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
