#!/usr/bin/env python3
"""merge_profiles.py A.hx B.hx ...: hexic-profile outputs of the same options
(one round each, taken at different times) as one, every figure the median
of the files' (the lower and upper middle averaged for an even count), on
stdout. The files must differ in their figures only: the words, names and
layout around them are compared, and a difference stops the merge."""
import re
import statistics
import sys

NUMBER = re.compile(r"[0-9]+(?:\.[0-9]+)?")


def split(text):
    """The text between the numbers, and the numbers as written."""
    return NUMBER.split(text), NUMBER.findall(text)


def merged(tokens):
    """The median of one figure over the files, written as the first file
    writes it (as many decimals; an integer as an integer)."""
    value = statistics.median(float(t) for t in tokens)
    first = tokens[0]
    if "." not in first:
        return str(int(round(value)))
    return "%.*f" % (len(first) - first.index(".") - 1, value)


def main(paths):
    if not paths:
        sys.exit("usage: merge_profiles.py A.hx B.hx ...")
    parts = [split(open(p).read()) for p in paths]
    words, _ = parts[0]
    for path, (other, numbers) in zip(paths, parts):
        if other != words or len(numbers) != len(parts[0][1]):
            sys.exit("merge_profiles.py: %s is not laid out as %s" % (path, paths[0]))
    columns = zip(*(numbers for _, numbers in parts))
    out = [words[0]]
    for text, tokens in zip(words[1:], columns):
        out += [merged(tokens), text]
    sys.stdout.write("".join(out))


if __name__ == "__main__":
    main(sys.argv[1:])
