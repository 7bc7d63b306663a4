# Code and no CFI at all (test_unwind_table.c: such a file has no table).
    .text
    .globl f
f:  nop
    ret
