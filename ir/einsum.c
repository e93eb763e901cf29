/* einsum.c — Einsum's equation parser (ir/einsum.h). */
#include "einsum.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static bool bad(char *msg, size_t n, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    if (msg && n) vsnprintf(msg, n, fmt, ap);
    va_end(ap);
    return false;
}

static int letter_index(char ch) {
    if (ch >= 'a' && ch <= 'z') return ch - 'a';
    if (ch >= 'A' && ch <= 'Z') return 26 + ch - 'A';
    return -1;
}

/* One term as written: its letters (index into a-zA-Z, or -1 at the ellipsis). */
typedef struct term {
    int n;
    int sym[OT_MAX_RANK + 1];
    bool has_ellipsis;
} term;

/* Reads one term from *p up to ',', '-' or the end; false on a bad character. */
static bool read_term(const char **p, term *t, const char *what, char *msg, size_t n) {
    memset(t, 0, sizeof *t);
    const char *s = *p;
    for (; *s && *s != ',' && *s != '-'; s++) {
        if (*s == ' ') continue;
        if (t->n > OT_MAX_RANK) return bad(msg, n, "%s: more than %d dims", what, OT_MAX_RANK);
        if (*s == '.') {
            if (strncmp(s, "...", 3) || t->has_ellipsis) return bad(msg, n, "%s: '.' outside one \"...\"", what);
            t->has_ellipsis = true;
            t->sym[t->n++] = -1;
            s += 2;
            continue;
        }
        int li = letter_index(*s);
        if (li < 0) return bad(msg, n, "%s: '%c' is not a letter", what, *s);
        t->sym[t->n++] = li;
    }
    *p = s;
    return true;
}

static int label_of(ot_einsum *e, int *ids, int li) {
    if (ids[li] < 0) {
        if (e->n_labels >= OT_EIN_MAX_LABELS) return -1;
        ids[li] = e->n_labels;
        e->letter[e->n_labels] = (char)(li < 26 ? 'a' + li : 'A' + li - 26);
        e->ellipsis[e->n_labels++] = false;
    }
    return ids[li];
}

/* Writes the dims of term t (an operand of `rank` dims, or the output when rank < 0)
 * as label ids into out; *count gets the dim count. */
static bool expand(ot_einsum *e, int *ids, const int *ell_ids, int n_ell, const term *t, int rank, int8_t *out,
                   int *count, const char *what, char *msg, size_t n) {
    int named = t->n - (t->has_ellipsis ? 1 : 0);
    int ell = 0;
    if (rank >= 0) {
        if (t->has_ellipsis ? named > rank : named != rank)
            return bad(msg, n, "%s names %d dims but its operand has %d", what, named, rank);
        ell = t->has_ellipsis ? rank - named : 0;
    } else {
        ell = t->has_ellipsis ? n_ell : 0;
    }
    if (named + ell > OT_MAX_RANK) return bad(msg, n, "%s: more than %d dims", what, OT_MAX_RANK);
    int k = 0;
    for (int i = 0; i < t->n; i++) {
        if (t->sym[i] < 0) {
            for (int j = 0; j < ell; j++)
                out[k++] = (int8_t)ell_ids[n_ell - ell + j];
            continue;
        }
        int id = label_of(e, ids, t->sym[i]);
        if (id < 0) return bad(msg, n, "more than %d distinct labels", OT_EIN_MAX_LABELS);
        out[k++] = (int8_t)id;
    }
    *count = k;
    return true;
}

bool ot_einsum_parse(const char *eq, int n_in, const int *ranks, ot_einsum *e, char *msg, size_t msg_size) {
    memset(e, 0, sizeof *e);
    if (!eq) return bad(msg, msg_size, "no equation");
    if (n_in < 1 || n_in > OT_EIN_MAX_IN) return bad(msg, msg_size, "%d operands (at most %d)", n_in, OT_EIN_MAX_IN);
    term terms[OT_EIN_MAX_IN], out;
    const char *p = eq;
    int nt = 0;
    for (;;) {
        if (nt >= n_in) return bad(msg, msg_size, "the equation has more terms than the %d operands", n_in);
        char what[32];
        snprintf(what, sizeof what, "term %d", nt + 1);
        if (!read_term(&p, &terms[nt], what, msg, msg_size)) return false;
        nt++;
        if (*p != ',') break;
        p++;
    }
    if (nt != n_in) return bad(msg, msg_size, "the equation has %d terms for %d operands", nt, n_in);
    bool explicit_out = *p == '-';
    if (explicit_out) {
        if (p[1] != '>') return bad(msg, msg_size, "'-' not followed by '>'");
        p += 2;
        if (!read_term(&p, &out, "the output term", msg, msg_size)) return false;
        if (*p) return bad(msg, msg_size, "unexpected '%c' in the output term", *p);
    }
    /* ellipsis dims: the most any operand's "..." stands for */
    int n_ell = 0;
    for (int k = 0; k < n_in; k++) {
        int named = terms[k].n - (terms[k].has_ellipsis ? 1 : 0);
        if (terms[k].has_ellipsis && ranks[k] - named > n_ell) n_ell = ranks[k] - named;
    }
    int ids[52], ell_ids[OT_MAX_RANK];
    for (int i = 0; i < 52; i++)
        ids[i] = -1;
    if (n_ell > OT_MAX_RANK) return bad(msg, msg_size, "\"...\" stands for more than %d dims", OT_MAX_RANK);
    for (int j = 0; j < n_ell; j++) {
        ell_ids[j] = e->n_labels;
        e->letter[e->n_labels] = '.';
        e->ellipsis[e->n_labels++] = true;
    }
    e->n_in = n_in;
    int uses[52] = {0};
    for (int k = 0; k < n_in; k++) {
        char what[32];
        snprintf(what, sizeof what, "term %d", k + 1);
        if (!expand(e, ids, ell_ids, n_ell, &terms[k], ranks[k], e->label[k], &e->rank[k], what, msg, msg_size))
            return false;
        for (int i = 0; i < terms[k].n; i++)
            if (terms[k].sym[i] >= 0) uses[terms[k].sym[i]]++;
    }
    if (explicit_out) {
        bool seen[52] = {false};
        for (int i = 0; i < out.n; i++) {
            int li = out.sym[i];
            if (li < 0) continue;
            char ch = (char)(li < 26 ? 'a' + li : 'A' + li - 26);
            if (ids[li] < 0) return bad(msg, msg_size, "the output's '%c' is in no input term", ch);
            if (seen[li]) return bad(msg, msg_size, "'%c' twice in the output term", ch);
            seen[li] = true;
        }
        return expand(e, ids, ell_ids, n_ell, &out, -1, e->out_label, &e->out_rank, "the output term", msg, msg_size);
    }
    /* implicit: the ellipsis dims, then the letters used once, upper case first */
    int k = 0;
    for (int j = 0; j < n_ell; j++)
        e->out_label[k++] = (int8_t)ell_ids[j];
    static const int order[52] = {26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43,
                                  44, 45, 46, 47, 48, 49, 50, 51, 0,  1,  2,  3,  4,  5,  6,  7,  8,  9,
                                  10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25};
    for (int i = 0; i < 52; i++) {
        int li = order[i];
        if (uses[li] != 1) continue;
        if (k >= OT_MAX_RANK) return bad(msg, msg_size, "the implicit output has more than %d dims", OT_MAX_RANK);
        e->out_label[k++] = (int8_t)ids[li];
    }
    e->out_rank = k;
    return true;
}
