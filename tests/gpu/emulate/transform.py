#!/usr/bin/env python3
"""Rewrites a .cu file into C++ that g++ compiles against cuda_emu.h:
  k<T><<<grid, block, smem, stream>>>(args)  ->  emu::launch(k<T>, grid, block, smem, stream)(args)
  extern __shared__ [__align__(N)] T name[];  ->  T *name = (T *)emu::dynamic_smem();
Usage: transform.py IN.cu OUT.cpp"""
import os
import re
import sys

src = open(sys.argv[1], encoding="utf-8").read()
launch = re.compile(r"([A-Za-z_]\w*(?:<[^;(){}<>]*>)?)\s*<<<(.*?)>>>\s*\(", re.S)
src, nlaunch = launch.subn(lambda m: "emu::launch(%s, %s)(" % (m.group(1), " ".join(m.group(2).split())), src)
dyn = re.compile(r"extern\s+__shared__\s+(?:__align__\(\d+\)\s+)?([\w ]+?)\s+(\w+)\[\];")
src = dyn.sub(lambda m: "%s *%s = (%s *)emu::dynamic_smem();" % (m.group(1), m.group(2), m.group(1)), src)
if "<<<" in src:
    sys.exit("transform.py: a launch left untransformed in " + sys.argv[1])
os.makedirs(os.path.dirname(os.path.abspath(sys.argv[2])), exist_ok=True)
open(sys.argv[2], "w", encoding="utf-8").write(src)
