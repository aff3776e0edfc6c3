// Bad input to mxlower-run, tried as a new user would: one clear error line, exit 1, nothing
// written, no traceback, no crash signal.

// RUN: echo "keep me" > %t.out.npz

// A corrupt .npz, as inputs or as the reference.
// RUN: %PYTHON -c "import io, numpy as np; b = io.BytesIO(); np.savez(b, arg0=np.ones(4, np.float32)); open(r'%t.cut.npz', 'wb').write(b.getvalue()[:100])"
// RUN: not mxlower-run %s -f @small -i %t.cut.npz -o %t.out.npz 2>&1 | FileCheck %s --check-prefix=NPZ
// RUN: not mxlower-run %s -f small --compare %t.cut.npz -o %t.out.npz 2>&1 | FileCheck %s --check-prefix=NPZ
// RUN: FileCheck %s --input-file=%t.out.npz --check-prefix=UNTOUCHED
// NPZ: mxlower-run: error: could not read '{{.*}}cut.npz' as a NumPy .npy/.npz file: File is not a zip file
// NPZ-NOT: Traceback
// UNTOUCHED: keep me

// -o naming a directory, or nothing.
// RUN: mkdir -p %t.dir.npz
// RUN: not mxlower-run %s -f small -o %t.dir.npz 2>&1 | FileCheck %s --check-prefix=ODIR
// ODIR: mxlower-run: error: could not open output file '{{.*}}dir.npz': is a directory
// RUN: not mxlower-run %s -f small -o "" 2>&1 | FileCheck %s --check-prefix=OEMPTY
// OEMPTY: mxlower-run: error: the output file name is empty

// A negative seed.
// RUN: not mxlower-run %s -f small --seed -1 2>&1 | FileCheck %s --check-prefix=SEED
// SEED: mxlower-run: error: --seed must be a non-negative integer, got -1

// Seeded inputs larger than the machine's memory.
// RUN: not mxlower-run %s -f huge 2>&1 | FileCheck %s --check-prefix=HUGE
// HUGE: mxlower-run: error: seeded inputs for @huge need {{.*}} GiB, more than this machine's {{.*}} GiB of memory

// A module nested 10,000 regions deep (the parser would overflow the C stack).
// RUN: %PYTHON -c "n = 10000; open(r'%t.deep.mlir', 'w').write(('module {' + chr(10)) * n + ('}' + chr(10)) * n)"
// RUN: not mxlower-run %t.deep.mlir 2>&1 | FileCheck %s --check-prefix=DEEP
// DEEP: deep.mlir:1001:8: error: brackets nest more than 1000 levels deep here

// A truncated dialect_resources blob.
// RUN: %PYTHON -c "t = open(r'%inputs/resource_blob.mlir').read(); open(r'%t.cut.mlir', 'w').write(t[:t.index('0x0400') + 12])"
// RUN: not mxlower-run %t.cut.mlir 2>&1 | FileCheck %s --check-prefix=CUT
// CUT: cut.mlir:9:14: error: expected '"' in string literal: a string in the file metadata is not closed on its line

// Zero-size tensors (the LLVM backend: test_tools_robustness.py).
// RUN: mxlower-run %s -f zero --backend=interpreter | FileCheck %s --check-prefix=ZERO
// RUN: mxlower-run %s -f zero --backend=xla | FileCheck %s --check-prefix=ZERO
// ZERO: %0 = dense<> : tensor<0x4xf32>
// ZERO-NEXT: %1 = dense<> : tensor<3x0xf8E4M3FN>

// An op StableHLO's interpreter cannot run aborts its process: an error naming the op.
// RUN: %PYTHON -c "open(r'%t.arith.mlir', 'w').write('func.func @main(%%x: tensor<2xf32>) -> tensor<2xf32> {%%0 = arith.addf %%x, %%x : tensor<2xf32> return %%0 : tensor<2xf32>}')"
// RUN: not mxlower-run %t.arith.mlir --backend=interpreter 2>&1 | FileCheck %s --check-prefix=ABORT
// ABORT: mxlower-run: error: the StableHLO interpreter failed (its process was killed by SIGABRT): Unsupported op: %0 = arith.addf %arg0, %arg0 : tensor<2xf32>

// A program that never ends, stopped by --timeout on every backend that runs it.
// RUN: not mxlower-run %s -f forever --timeout 2 2>&1 | FileCheck %s --check-prefix=TIMEOUT
// RUN: not mxlower-run %s -f forever --timeout 2 --backend=interpreter 2>&1 | FileCheck %s --check-prefix=TIMEOUT
// TIMEOUT: mxlower-run: error: the run did not finish within 2 s (--timeout); it was stopped
// RUN: not mxlower-run %s -f small --timeout 0 2>&1 | FileCheck %s --check-prefix=TIMEOUT0
// TIMEOUT0: mxlower-run: error: --timeout must be a positive number of seconds, got 0
// A limit beyond any wait the platform can time is refused naming the limit ('1e300' used to
// pass the check and die with OverflowError in the child-process wait); 'inf' is no limit.
// RUN: not mxlower-run %s -f small --timeout 1e300 2>&1 | FileCheck %s --check-prefix=TIMEOUTBIG
// TIMEOUTBIG: mxlower-run: error: --timeout must be at most 10000000 seconds (or inf for no limit), got 1e+300
// TIMEOUTBIG-NOT: Traceback
// RUN: not mxlower-run %s -f small --timeout nan 2>&1 | FileCheck %s --check-prefix=TIMEOUTNAN
// TIMEOUTNAN: mxlower-run: error: --timeout must be a positive number of seconds, got nan
// RUN: mxlower-run %s -f small --timeout inf --backend=interpreter | FileCheck %s --check-prefix=INTIME
// A run that ends in time gives its results.
// RUN: mxlower-run %s -f small --timeout 300 --backend=interpreter | FileCheck %s --check-prefix=INTIME
// INTIME: %0 = dense<[-1.0, 1.0, 3.0, 5.0]> : tensor<4xf32>

func.func @small(%a: tensor<4xf32>) -> tensor<4xf32> {
  %c = stablehlo.constant dense<[-1.0, 1.0, 3.0, 5.0]> : tensor<4xf32>
  %0 = stablehlo.multiply %a, %c : tensor<4xf32>
  %1 = stablehlo.divide %0, %a : tensor<4xf32>
  return %1 : tensor<4xf32>
}

func.func @huge(%a: tensor<100000x100000x100xf32>) -> tensor<100000x100000x100xf32> {
  return %a : tensor<100000x100000x100xf32>
}

func.func @zero(%a: tensor<0x4xf32>, %b: tensor<3x0xf8E4M3FN>) -> (tensor<0x4xf32>, tensor<3x0xf8E4M3FN>) {
  %0 = stablehlo.add %a, %a : tensor<0x4xf32>
  return %0, %b : tensor<0x4xf32>, tensor<3x0xf8E4M3FN>
}

func.func @forever(%x: tensor<i32>) -> tensor<i32> {
  %r = stablehlo.while(%i = %x) : tensor<i32>
    cond {
      %t = stablehlo.constant dense<true> : tensor<i1>
      stablehlo.return %t : tensor<i1>
    } do {
      %one = stablehlo.constant dense<1> : tensor<i32>
      %n = stablehlo.add %i, %one : tensor<i32>
      stablehlo.return %n : tensor<i32>
    }
  return %r : tensor<i32>
}
