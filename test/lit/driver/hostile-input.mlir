// Input that MLIR's own parser cannot survive is refused before it gets there: one located
// error, exit 1, no traceback, no crash signal, nothing written -- in mxlower-opt and
// mxlower-translate alike (mxlower-run: test/lit/run/mxlower-run-hostile-input.mlir).

// A module nested 10,000 regions deep: the recursive parser would overflow the C stack.
// RUN: %PYTHON -c "n = 10000; open(r'%t.deep.mlir', 'w').write(('module {' + chr(10)) * n + ('}' + chr(10)) * n)"
// RUN: echo "keep me" > %t.out
// RUN: not mxlower-opt %t.deep.mlir -o %t.out 2>&1 | FileCheck %s --check-prefix=DEEP
// RUN: FileCheck %s --input-file=%t.out --check-prefix=UNTOUCHED
// RUN: not mxlower-translate %t.deep.mlir --chip=sm_90a -o %t.out 2>&1 | FileCheck %s --check-prefix=DEEP
// RUN: not mxlower-translate %t.deep.mlir --chip=sm_90a --no-pipeline 2>&1 | FileCheck %s --check-prefix=DEEP
// RUN: FileCheck %s --input-file=%t.out --check-prefix=UNTOUCHED
// DEEP: deep.mlir:1001:8: error: brackets nest more than 1000 levels deep here; mxlower refuses such input (MLIR's recursive parser would overflow the stack)
// DEEP-NEXT: module {
// DEEP-NEXT: {{^       \^$}}
// DEEP-NOT: Traceback
// UNTOUCHED: keep me

// ... in generic form too, 5,000 regions deep.
// RUN: %PYTHON -c "n = 5000; open(r'%t.deepg.mlir', 'w').write((chr(34) + 'test.op' + chr(34) + '() ({' + chr(10)) * n + ('}) : () -> ()' + chr(10)) * n)"
// RUN: not mxlower-opt --allow-unregistered-dialect %t.deepg.mlir 2>&1 | FileCheck %s --check-prefix=DEEPG
// DEEPG: deepg.mlir:501:10: error: brackets nest more than 1000 levels deep here

// Just below the limit, a deep module is fine.
// RUN: %PYTHON -c "n = 999; open(r'%t.ok.mlir', 'w').write(('module {' + chr(10)) * n + ('}' + chr(10)) * n)"
// RUN: mxlower-opt %t.ok.mlir --canonicalize -o %t.ok.out

// A dialect_resources blob cut off at the end of the file: jaxlib's parser reports it and then
// reads past the end of its buffer (SIGSEGV); upstream MLIR's asserts.
// RUN: %PYTHON -c "t = open(r'%inputs/resource_blob.mlir').read(); open(r'%t.cut.mlir', 'w').write(t[:t.index('0x0400') + 12])"
// RUN: not mxlower-opt --allow-unregistered-dialect %t.cut.mlir -o %t.out 2>&1 | FileCheck %s --check-prefix=CUT
// RUN: not mxlower-translate %t.cut.mlir --chip=sm_90a -o %t.out 2>&1 | FileCheck %s --check-prefix=CUT
// RUN: FileCheck %s --input-file=%t.out --check-prefix=UNTOUCHED
// CUT: cut.mlir:9:14: error: expected '"' in string literal: a string in the file metadata is not closed on its line
// CUT-NEXT: blob1: "0x0400000000
// CUT-NOT: Traceback

// ... cut off after the key, or before the section closes.
// RUN: %PYTHON -c "t = open(r'%inputs/resource_blob.mlir').read(); open(r'%t.nokey.mlir', 'w').write(t[:t.index('0x0400') - 1] + chr(10))"
// RUN: not mxlower-opt --allow-unregistered-dialect %t.nokey.mlir 2>&1 | FileCheck %s --check-prefix=NOVALUE
// NOVALUE: nokey.mlir:6:1: error: the file metadata ('{-#') is not closed by '#-}'
// RUN: %PYTHON -c "t = open(r'%inputs/resource_blob.mlir').read(); open(r'%t.open.mlir', 'w').write(t[:t.index('#-}')])"
// RUN: not mxlower-opt --allow-unregistered-dialect %t.open.mlir 2>&1 | FileCheck %s --check-prefix=OPEN
// OPEN: open.mlir:6:1: error: the file metadata ('{-#') is not closed by '#-}'

// A blob whose alignment prefix is 0 (jaxlib's parser: std::bad_alloc).
// RUN: %PYTHON -c "t = open(r'%inputs/resource_blob.mlir').read(); open(r'%t.align.mlir', 'w').write(t.replace('0x04000000', '0x00000000'))"
// RUN: not mxlower-opt --allow-unregistered-dialect %t.align.mlir 2>&1 | FileCheck %s --check-prefix=ALIGN
// ALIGN: align.mlir:9:14: error: the hex blob of resource 'blob1' encodes alignment 0 in its first 4 bytes (want a power of 2)

// -o naming a directory or nothing: refused before any work.
// RUN: not mxlower-opt %inputs/resource_blob.mlir --allow-unregistered-dialect -o %S 2>&1 | FileCheck %s --check-prefix=ODIR
// RUN: not mxlower-translate %inputs/resource_blob.mlir --chip=sm_90a -o %S 2>&1 | FileCheck %s --check-prefix=ODIR
// ODIR: error: could not open output file '{{.*}}driver': is a directory
// RUN: not mxlower-opt %inputs/resource_blob.mlir --allow-unregistered-dialect -o "" 2>&1 | FileCheck %s --check-prefix=OEMPTY
// OEMPTY: mxlower-opt: error: the output file name is empty
