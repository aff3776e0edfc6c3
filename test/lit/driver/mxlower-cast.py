# mxlower-cast: a researcher's comparison of datatypes on their own tensor, and its errors.
# This file writes the input tensor (a fixed ramp whose statistics are known) when run by Python.

# RUN: %PYTHON %s %t.npy
# RUN: mxlower-cast %t.npy -d mxfp8_e4m3,nvfp4 -n e3m4 -s e8m0_t32 -r even,zero | FileCheck %s
# CHECK: # {{.*}}.npy: float32 [4, 64], 256 values
# CHECK-NEXT: datatype  {{ *}}round  scale  bits  RMSE
# CHECK-NEXT: mxfp8_e4m3     even   max    8.25
# CHECK-NEXT: mxfp8_e4m3     zero   max    8.25
# CHECK-NEXT: nvfp4          even   -       4.5
# CHECK-NEXT: nvfp4          zero   -       4.5
# CHECK-NEXT: e3m4:e8m0_t32  even   max    8.25
# CHECK-NEXT: e3m4:e8m0_t32  zero   max    8.25

# The values k / 8 (k = 0..255) are exact in float32 and in e5m7 (8 significant bits): no error at all.
# RUN: mxlower-cast %t.npy -d e5m7 --json | FileCheck %s --check-prefix=EXACT
# EXACT: "rmse": 0.0,
# EXACT: "sqnr_db": "inf",
# EXACT: "saturated": 0.0,

# RUN: not mxlower-cast %t.npy -d e3m4:e8m0_t48 2>&1 | FileCheck %s --check-prefix=SPEC
# SPEC: mxlower-cast: error: {{.*}}a tile size must be a power of two from 2 to 1024, got 48
# SPEC-NOT: Traceback

# RUN: not mxlower-cast %t.does-not-exist.npy -d nvfp4 2>&1 | FileCheck %s --check-prefix=MISSING
# MISSING: mxlower-cast: error: could not open input file '{{.*}}does-not-exist.npy': no such file

import sys

import numpy as np

if __name__ == "__main__":
    np.save(sys.argv[1], (np.arange(256, dtype=np.float32) / 8).reshape(4, 64))
