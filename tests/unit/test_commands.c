/*
** The command table (app/cli/commands.c): dispatch, help and usage errors are generated from it, so
** these checks hold for every row, including one added later.
*/
#include "test_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../app/cli/cli.h"

static char *help_of(const qs_command *c)
{
    size_t cap = 1 << 16;
    char *buf = calloc(1, cap);
    assert_non_null(buf);
    FILE *f = fmemopen(buf, cap - 1, "w");
    assert_non_null(f);
    qs_command_help(f, c);
    fclose(f);
    return buf;
}

/* every subcommand is named in its command's usage line and has its paragraph in the help */
static void test_help_names_every_subcommand(void **state)
{
    (void)state;
    int subs = 0;
    for (const qs_command *c = qs_commands; c->name; c++) {
        assert_true((c->run != NULL) != (c->subs != NULL));   /* one way to run */
        if (!c->subs) continue;
        char *h = help_of(c);
        char *eol = strchr(h, '\n');
        assert_non_null(eol);
        for (const qs_subcommand *s = c->subs; s->name; s++, subs++) {
            char para[64];
            snprintf(para, sizeof para, "\n  %s ", s->name);
            char *at = strstr(h, s->name);
            if (!at || at > eol || !strstr(h, para)) {
                print_error("`qscope help %s` does not name '%s'\n", c->name, s->name);
                fail();
            }
            assert_non_null(s->run);
        }
        free(h);
    }
    assert_true(subs >= 10);   /* llm's nine and sim grpo */
}

/* every subcommand has its own help: synopsis and options, opening with its usage line */
static void test_subcommand_help(void **state)
{
    (void)state;
    for (const qs_command *c = qs_commands; c->name; c++)
        for (const qs_subcommand *s = c->subs; s && s->name; s++) {
            if (!s->args || !s->options || !*s->options) {
                print_error("%s %s has no synopsis or options for `qscope help %s %s`\n", c->name, s->name, c->name, s->name);
                fail();
            }
            char *buf = NULL, want[128];
            size_t n = 0;
            FILE *f = open_memstream(&buf, &n);
            assert_non_null(f);
            qs_subcommand_help(f, c, s);
            fclose(f);
            snprintf(want, sizeof want, "usage: qscope [--db PATH] %s %s %s\n", c->name, s->name, s->args);
            assert_int_equal(strncmp(buf, want, strlen(want)), 0);
            assert_non_null(strstr(buf, s->options));
            assert_ptr_equal(qs_subcommand_named(c, s->name), s);
            free(buf);
        }
    assert_null(qs_subcommand_named(qs_command_find("llm"), "nope"));
    assert_null(qs_subcommand_named(qs_command_find("ls"), "eval"));
}

/* dispatch finds every row; an unknown or missing subcommand is not found */
static void test_subcommand_find(void **state)
{
    (void)state;
    const qs_command *llm = qs_command_find("llm");
    assert_non_null(llm);
    for (const qs_subcommand *s = llm->subs; s->name; s++) {
        char *argv[] = {"llm", (char *)s->name, NULL};
        assert_ptr_equal(qs_subcommand_find(llm, 2, argv), s);
    }
    char *bad[] = {"llm", "frobnicate", NULL};
    assert_null(qs_subcommand_find(llm, 2, bad));
    assert_null(qs_subcommand_find(llm, 1, bad));
    assert_null(qs_subcommand_find(qs_command_find("ls"), 2, bad));
}

/* the command lines that split their work over MPI ranks, as docs/scale.md lists them */
static void test_sharded(void **state)
{
    (void)state;
    char got[256] = "";
    for (const qs_command *c = qs_commands; c->name; c++) {
        char *argv[] = {(char *)c->name, NULL, NULL};
        if (!c->subs) {
            if (qs_command_sharded(c, 1, argv)) strcat(strcat(got, c->name), ";");
            continue;
        }
        for (const qs_subcommand *s = c->subs; s->name; s++) {
            argv[1] = (char *)s->name;
            if (qs_command_sharded(c, 2, argv)) strcat(strcat(strcat(strcat(got, c->name), " "), s->name), ";");
        }
    }
    assert_string_equal(got, "analyze;report;claims;sim grpo;rl grpo;llm eval;llm sensitivity;train;");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_help_names_every_subcommand),
        cmocka_unit_test(test_subcommand_find),
        cmocka_unit_test(test_subcommand_help),
        cmocka_unit_test(test_sharded),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
