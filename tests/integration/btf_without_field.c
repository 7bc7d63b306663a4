/*
 * btf_without_field.c - writes a copy of a kernel's BTF in which one member
 * of one struct has another name, so that CO-RE sees a kernel without that
 * field: test_kernel_fields.py loads heapprofd's object against it
 * (HEAPPROFD_TEST_BTF) to check that a missing field costs only its
 * feature. Renaming keeps every offset and size, so all other relocations
 * resolve as they do against the running kernel.
 *
 *   btf_without_field IN OUT STRUCT MEMBER
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <bpf/btf.h>
#include <bpf/libbpf.h>

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: %s IN OUT STRUCT MEMBER\n", argv[0]);
        return 2;
    }
    struct btf *btf = btf__parse(argv[1], NULL);
    if (libbpf_get_error(btf)) {
        fprintf(stderr, "read BTF %s: %s\n", argv[1], strerror(errno));
        return 1;
    }
    /* Added first: adding a string makes the BTF writable, which moves its types. */
    int gone = btf__add_str(btf, "heapprof_test_field_gone");
    int id = btf__find_by_name_kind(btf, argv[3], BTF_KIND_STRUCT);
    if (gone < 0 || id < 0) {
        fprintf(stderr, "struct %s not in %s\n", argv[3], argv[1]);
        return 1;
    }
    struct btf_type *t = (struct btf_type *)btf__type_by_id(btf, (__u32)id);
    struct btf_member *m = btf_members(t);
    int found = 0;
    for (unsigned i = 0; i < btf_vlen(t); i++, m++)
        if (strcmp(btf__name_by_offset(btf, m->name_off), argv[4]) == 0) {
            m->name_off = (__u32)gone;
            found = 1;
        }
    if (!found) {
        fprintf(stderr, "struct %s has no member %s\n", argv[3], argv[4]);
        return 1;
    }
    __u32 size;
    const void *raw = btf__raw_data(btf, &size);
    FILE *f = fopen(argv[2], "wb");
    if (!raw || !f || fwrite(raw, 1, size, f) != size || fclose(f) != 0) {
        fprintf(stderr, "write %s: %s\n", argv[2], strerror(errno));
        return 1;
    }
    btf__free(btf);
    return 0;
}
