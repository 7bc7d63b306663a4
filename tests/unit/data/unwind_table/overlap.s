# Overlapping FDEs for test_unwind_table.c, in a hand-written .eh_frame (gas
# never makes them). Each FDE sets its own CFA offset, so the test can tell
# which one owns an address. Link with -Wl,--no-eh-frame-hdr: ld refuses to
# index overlapping FDEs.
    .text
    .globl outer, partial, same
    .hidden outer, partial, same
outer:   .fill 32, 1, 0x90
partial: .fill 32, 1, 0x90
same:    .fill 16, 1, 0x90

# FDE name, start, length, CFA offset: pc-relative sdata4 addresses, no
# augmentation data, DW_CFA_def_cfa_offset at the start.
    .macro FDE name, start, len, off
\name:
    .long \name\()_end - \name\()_id
\name\()_id:
    .long \name\()_id - cie
    .long \start - .
    .long \len
    .uleb128 0
    .byte 0x0e, \off
    .balign 8, 0
\name\()_end:
    .endm

    .section .eh_frame,"a",@unwind
cie:
    .long cie_end - cie_id
cie_id:
    .long 0            # CIE id
    .byte 1            # version
    .asciz "zR"
    .uleb128 1         # code alignment factor
    .sleb128 -8        # data alignment factor
    .uleb128 16        # return address column
    .uleb128 1         # augmentation data length
    .byte 0x1b         # FDE encoding: DW_EH_PE_pcrel | DW_EH_PE_sdata4
    .byte 0x0c, 7, 8   # DW_CFA_def_cfa rsp, 8
    .byte 0x90, 1      # DW_CFA_offset rip, cfa-8
    .balign 8, 0
cie_end:
    FDE fa, outer, 32, 16        # outer [0, 32) rsp+16 ...
    FDE fb, outer+8, 8, 24       # ... wholly holds [8, 16) rsp+24
    FDE fc, partial, 16, 32      # [0, 16) rsp+32 ...
    FDE fd, partial+8, 16, 40    # ... and [8, 24) rsp+40 overlap in part
    FDE fe, same, 8, 48          # two FDEs start at `same`:
    FDE ff, same, 16, 56         # [0, 8) rsp+48 and [0, 16) rsp+56
    .long 0                      # terminator
