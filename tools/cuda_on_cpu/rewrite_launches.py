#!/usr/bin/env python3
"""Rewrites a .cu file into C++ that the CUDA-on-CPU emulator compiles.

Each launch `kernel<T><<<grid, block, shared, stream>>>(args);` becomes
`::gpu_emu::launch(::gpu_emu::Config(grid, block, shared, stream),
[&](auto&&... a_) { kernel<T>(a_...); }, args);`, keeping every newline in
place, and a #line directive keeps the .cu file's name and line numbers.

usage: rewrite_launches.py SOURCE.cu OUTPUT.cpp
"""
import os
import re
import sys

NAME = re.compile(r"[A-Za-z_]\w*(::[A-Za-z_]\w*)*")


def kernel_start(text, end):
    """Where the kernel expression that ends at `end` (before <<<) begins:
    an identifier, optionally followed by balanced <template arguments>."""
    i = end
    while i > 0 and text[i - 1].isspace():
        i -= 1
    if text[i - 1] == ">":  # template arguments: walk back to the matching <
        depth = 0
        while True:
            i -= 1
            depth += {">": 1, "<": -1}.get(text[i], 0)
            if depth == 0:
                break
        while i > 0 and text[i - 1].isspace():
            i -= 1
    j = i
    while j > 0 and (text[j - 1].isalnum() or text[j - 1] in "_:"):
        j -= 1
    if not NAME.fullmatch(text[j:i]):
        raise SystemExit(f"rewrite_launches: no kernel name before <<< at offset {end}")
    return j


def closing_paren(text, open_at):
    """The index of the ) that closes the ( at open_at."""
    depth = 0
    for i in range(open_at, len(text)):
        depth += {"(": 1, ")": -1}.get(text[i], 0)
        if depth == 0:
            return i
    raise SystemExit(f"rewrite_launches: unbalanced ( at offset {open_at}")


def rewrite(text):
    out, pos = [], 0
    while (lt := text.find("<<<", pos)) >= 0:
        start = kernel_start(text, lt)
        gt = text.index(">>>", lt)
        open_at = gt + 3
        while text[open_at].isspace():
            open_at += 1
        if text[open_at] != "(":
            raise SystemExit(f"rewrite_launches: no ( after >>> at offset {gt}")
        close = closing_paren(text, open_at)
        kernel, config = text[start:lt], text[lt + 3 : gt]
        args = text[open_at + 1 : close]
        out.append(text[pos:start])
        out.append(f"::gpu_emu::launch(::gpu_emu::Config({config}), "
                   f"[&](auto&&... a_) {{ {kernel}(a_...); }}{text[gt + 3:open_at]}")
        out.append(f", {args})" if args.strip() else ")")
        pos = close + 1
    out.append(text[pos:])
    return "".join(out)


def main():
    source, output = sys.argv[1], sys.argv[2]
    with open(source) as f:
        text = f.read()
    os.makedirs(os.path.dirname(output), exist_ok=True)
    with open(output, "w") as f:
        f.write(f'#line 1 "{source}"\n' + rewrite(text))


if __name__ == "__main__":
    main()
