# Odd CFI for test_unwind_table.c, one function per case. Every instruction
# is one byte (nop, ret, push, pop, leave) except `mov %rsp,%rbp` (three), so
# the offsets the test looks at are exact. Built with gcc -shared -nostdlib;
# the test also builds copies with `.cfi_sections .debug_frame` and
# `.cfi_sections .eh_frame, .debug_frame` prepended.
    .text
    .macro FN name
    .globl \name
    .type \name,@function
\name:
    .endm

# DW_CFA_def_cfa_expression: DW_OP_breg7 8; DW_OP_deref (not the PLT one)
    FN f_expr
    .cfi_startproc
    nop
    .cfi_escape 0x0f, 0x03, 0x77, 0x08, 0x06
    nop
    ret
    .cfi_endproc

# The return address undefined: the outermost frame
    FN f_undef_rip
    .cfi_startproc
    .cfi_undefined rip
    nop
    ret
    .cfi_endproc

# A gap with no FDE
    .skip 64

# The return address in a register
    FN f_ra_register
    .cfi_startproc
    nop
    .cfi_register rip, rax
    nop
    ret
    .cfi_endproc

# DW_CFA_remember_state / DW_CFA_restore_state around an early return
    FN f_state
    .cfi_startproc
    push %rbp
    .cfi_def_cfa_offset 16
    .cfi_offset rbp, -16
    nop
    .cfi_remember_state
    pop %rbp
    .cfi_def_cfa_offset 8
    .cfi_restore rbp
    ret
    .cfi_restore_state
    nop
    ret
    .cfi_endproc

# A CFA offset of 2^32 (readelf shows it cut to 0), then %rbp saved too far away for 16 bits
    FN f_huge
    .cfi_startproc
    nop
    .cfi_def_cfa_offset 0x100000000
    nop
    .cfi_def_cfa_offset 16
    .cfi_offset rbp, -0x20000
    nop
    ret
    .cfi_endproc

# A signal trampoline ('S' augmentation; gas puts it in .eh_frame only)
    FN f_signal
    .cfi_startproc
    .cfi_signal_frame
    nop
    ret
    .cfi_endproc

# The PLT expression with DW_OP_lit10
    FN f_plt10
    .cfi_startproc
    nop
    .cfi_escape 0x0f, 0x0b, 0x77, 0x08, 0x80, 0x00, 0x3f, 0x1a, 0x3a, 0x2a, 0x33, 0x24, 0x22
    nop
    ret
    .cfi_endproc

# DW_CFA_GNU_window_save: SPARC's, meaningless on x86_64
    FN f_window_save
    .cfi_startproc
    nop
    .cfi_escape 0x2d
    nop
    ret
    .cfi_endproc

# 40 x DW_CFA_remember_state: deeper than the interpreter follows
    FN f_deep
    .cfi_startproc
    nop
    .rept 40
    .cfi_escape 0x0a
    .endr
    nop
    ret
    .cfi_endproc

# %rbp kept in another register
    FN f_rbp_register
    .cfi_startproc
    nop
    .cfi_register rbp, rbx
    nop
    ret
    .cfi_endproc

# DW_CFA_GNU_args_size 16: changes nothing for unwinding
    FN f_args_size
    .cfi_startproc
    nop
    .cfi_escape 0x2e, 0x10
    nop
    ret
    .cfi_endproc

# The return address somewhere other than CFA - 8
    FN f_ra_offset16
    .cfi_startproc
    nop
    .cfi_offset rip, -16
    nop
    ret
    .cfi_endproc

# DW_CFA_def_cfa_sf rsp, -2: times the data alignment factor -8, CFA = rsp + 16
    FN f_cfa_sf
    .cfi_startproc
    nop
    .cfi_escape 0x12, 0x07, 0x7e
    nop
    ret
    .cfi_endproc

# DW_CFA_restore_state with nothing remembered
    FN f_restore_empty
    .cfi_startproc
    nop
    .cfi_escape 0x0b
    nop
    ret
    .cfi_endproc

# A CFA based on a register other than %rsp and %rbp
    FN f_r12
    .cfi_startproc
    nop
    .cfi_def_cfa r12, 8
    nop
    ret
    .cfi_endproc

# %rbp's value (not its save slot) at CFA - 16
    FN f_val_offset_rbp
    .cfi_startproc
    nop
    .cfi_val_offset rbp, -16
    nop
    ret
    .cfi_endproc

# A frame-pointer frame: CFA = rbp + 16 after the prologue
    FN f_rbp_cfa
    .cfi_startproc
    push %rbp
    .cfi_def_cfa_offset 16
    .cfi_offset rbp, -16
    mov %rsp, %rbp
    .cfi_def_cfa_register rbp
    nop
    leave
    .cfi_def_cfa rsp, 8
    ret
    .cfi_endproc

# DW_CFA_GNU_negative_offset_extended rbp, 2: %rbp saved at CFA + 16
    FN f_neg_offset
    .cfi_startproc
    nop
    .cfi_escape 0x2f, 0x06, 0x02
    nop
    ret
    .cfi_endproc

# An expression CFA, then DW_CFA_def_cfa_offset, which only a register CFA can take
    FN f_expr_then_offset
    .cfi_startproc
    nop
    .cfi_escape 0x0f, 0x02, 0x77, 0x08
    nop
    .cfi_def_cfa_offset 16
    nop
    ret
    .cfi_endproc
