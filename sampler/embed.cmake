# embed.cmake - writes the file IN as a C array (hp_sampler_elf,
# hp_sampler_elf_len) into OUT. Run with cmake -P.
file(READ ${IN} hex HEX)
string(LENGTH "${hex}" n)
math(EXPR len "${n} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
string(REGEX REPLACE "((0x[0-9a-f][0-9a-f],){16})" "\\1\n" bytes "${bytes}")
file(WRITE ${OUT} "/* Generated from hp_sampler.so by sampler/embed.cmake. */\n"
  "#include <stddef.h>\n"
  "const unsigned char hp_sampler_elf[] __attribute__((aligned(16))) = {\n${bytes}\n};\n"
  "const size_t hp_sampler_elf_len = ${len};\n")
