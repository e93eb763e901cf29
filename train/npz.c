/* npz.c — .npz writer (see npz.h): zip members stored (method 0) with their CRC-32,
 * a central directory and the end record, as np.savez writes them uncompressed. */
#include "train/npz.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/atomic_file.h"
#include "train/npy.h"

#define ZIP_MAX ((uint64_t)UINT32_MAX)
#define ZIP_DATE_1980 0x21 /* 1980-01-01, the zip epoch: the archive does not depend on the clock */

static uint32_t crc32_update(uint32_t crc, const unsigned char *p, size_t n) {
    crc = ~crc;
    for (size_t i = 0; i < n; i++) {
        crc ^= p[i];
        for (int k = 0; k < 8; k++) crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1u)));
    }
    return ~crc;
}

static void put16(FILE *f, unsigned v) {
    fputc((int)(v & 0xff), f);
    fputc((int)((v >> 8) & 0xff), f);
}

static void put32(FILE *f, uint32_t v) {
    put16(f, v & 0xffff);
    put16(f, v >> 16);
}

typedef struct member {
    char name[520];
    uint32_t crc, size, offset;
} member;

/* The fields local and central headers share, from "version needed" to the name length. */
static void common_fields(FILE *f, const member *m) {
    put16(f, 20); /* version needed: 2.0 */
    put16(f, 0);  /* flags */
    put16(f, 0);  /* stored */
    put16(f, 0);  /* time */
    put16(f, ZIP_DATE_1980);
    put32(f, m->crc);
    put32(f, m->size);
    put32(f, m->size);
    put16(f, (unsigned)strlen(m->name));
}

ot_status ot_npz_write(const char *path, const char *const *names, const ot_tensor *const *tensors, int n,
                       ot_error *err) {
    member *mem = ot_xcalloc((size_t)n + 1, sizeof *mem);
    if (!mem) return ot_fail(err, OT_E_MEMORY, "%s: out of memory", path);
    ot_atomic_file *af = NULL;
    ot_status st = ot_atomic_open(path, &af, err);
    FILE *f = st ? NULL : ot_atomic_stream(af);
    uint64_t at = 0;
    for (int i = 0; !st && i < n; i++) {
        unsigned char head[OT_NPY_HEADER_MAX];
        size_t hl = 0;
        if ((st = ot_npy_header(tensors[i], 0, path, head, &hl, err))) break;
        member *m = &mem[i];
        int nl = snprintf(m->name, sizeof m->name, "%s.npy", names[i]);
        uint64_t size = hl + tensors[i]->nbytes;
        if (nl < 0 || (size_t)nl >= sizeof m->name || at + size + 30 + (uint64_t)nl > ZIP_MAX) {
            st = ot_fail(err, OT_E_UNSUPPORTED, "%s: member '%s' is too large or its name too long for a .npz", path,
                         names[i]);
            break;
        }
        m->crc = crc32_update(crc32_update(0, head, hl), tensors[i]->data, tensors[i]->nbytes);
        m->size = (uint32_t)size;
        m->offset = (uint32_t)at;
        put32(f, 0x04034b50);
        common_fields(f, m);
        put16(f, 0); /* extra */
        fputs(m->name, f);
        fwrite(head, 1, hl, f); /* a failed write is reported by the commit */
        if (tensors[i]->nbytes) fwrite(tensors[i]->data, 1, tensors[i]->nbytes, f);
        at += 30 + (uint64_t)nl + size;
    }
    uint64_t cd = at;
    for (int i = 0; !st && i < n; i++) {
        put32(f, 0x02014b50);
        put16(f, 20); /* made by 2.0 */
        common_fields(f, &mem[i]);
        put16(f, 0); /* extra */
        put16(f, 0); /* comment */
        put16(f, 0); /* disk */
        put16(f, 0); /* internal attributes */
        put32(f, 0); /* external attributes */
        put32(f, mem[i].offset);
        fputs(mem[i].name, f);
        at += 46 + strlen(mem[i].name);
    }
    if (!st && (at > ZIP_MAX || n > 0xffff))
        st = ot_fail(err, OT_E_UNSUPPORTED, "%s: too large for a .npz without zip64", path);
    if (!st) {
        put32(f, 0x06054b50);
        put16(f, 0);
        put16(f, 0);
        put16(f, (unsigned)n);
        put16(f, (unsigned)n);
        put32(f, (uint32_t)(at - cd));
        put32(f, (uint32_t)cd);
        put16(f, 0);
        st = ot_atomic_commit(af, err);
    } else if (af) {
        ot_atomic_abort(af);
    }
    free(mem);
    return st;
}
