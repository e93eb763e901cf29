/* name_pattern.c — globs by default, "re:" regular expressions (name_pattern.h). */
#include <fnmatch.h>
#include <string.h>

#include "ir/name_pattern.h"

ot_status ot_name_pattern_compile(ot_name_pattern *p, const char *opt, const char *text, ot_error *err) {
    memset(p, 0, sizeof *p);
    p->text = text;
    size_t k = strlen(OT_NAME_PATTERN_RE_PREFIX);
    p->is_regex = text && !strncmp(text, OT_NAME_PATTERN_RE_PREFIX, k);
    if (!text || !text[p->is_regex ? k : 0])
        return ot_fail(err, OT_E_USAGE, "%s: an empty %s", opt, p->is_regex ? "regular expression after 're:'" : "glob");
    if (!p->is_regex) return OT_OK;
    int rc = regcomp(&p->re, text + k, REG_EXTENDED | REG_NOSUB);
    if (rc != 0) {
        char msg[256];
        regerror(rc, &p->re, msg, sizeof msg);
        return ot_fail(err, OT_E_USAGE, "%s '%s': not a valid regular expression (POSIX extended, after 're:'): %s", opt,
                       text, msg);
    }
    p->compiled = true;
    return OT_OK;
}

bool ot_name_pattern_match(const ot_name_pattern *p, const char *name) {
    if (p->is_regex) return p->compiled && regexec(&p->re, name, 0, NULL, 0) == 0;
    return fnmatch(p->text, name, 0) == 0;
}

void ot_name_pattern_free(ot_name_pattern *p) {
    if (p->compiled) regfree(&p->re);
    p->compiled = false;
}

bool ot_name_pattern_as_regex(ot_name_pattern *p) {
    if (p->is_regex) return true;
    /* a glob's own wildcards (ln_9*) mean something else in a regex: such a pattern is
     * read the old way only when it also holds what only a regex writes (^layer1\..*) */
    if (strpbrk(p->text, "*?") && !strpbrk(p->text, "^$\\|()+{")) return false;
    if (regcomp(&p->re, p->text, REG_EXTENDED | REG_NOSUB) != 0) return false;
    p->compiled = p->is_regex = p->legacy = true;
    return true;
}

void ot_name_pattern_as_glob(ot_name_pattern *p) {
    if (!p->legacy) return;
    ot_name_pattern_free(p);
    p->is_regex = p->legacy = false;
}

ot_status ot_name_pattern_no_match(const ot_name_pattern *p, const char *opt, const char *what, const char *hint,
                                   ot_error *err) {
    if (p->is_regex)
        return ot_fail(err, OT_E_USAGE, "%s '%s': the regular expression matches no %s%s", opt, p->text, what, hint);
    /* a glob must match the whole name: say so, and how the old regex reading is written */
    if (!strpbrk(p->text, "*?["))
        return ot_fail(err, OT_E_USAGE,
                       "%s '%s': the glob matches no %s (a glob matches whole names: '*%s*' matches it anywhere in "
                       "a name; 're:%s' reads it as a regular expression)%s",
                       opt, p->text, what, p->text, p->text, hint);
    return ot_fail(err, OT_E_USAGE,
                   "%s '%s': the glob matches no %s (a glob matches whole names; 're:REGEX' takes a regular "
                   "expression)%s",
                   opt, p->text, what, hint);
}
