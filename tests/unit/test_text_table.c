/*
** Text tables sized by their cells (app/cli/text_table.h): columns line up whatever the widths and
** whatever multi-byte characters ("±") the cells hold; rows end without spaces; a tail widens nothing.
*/
#include "test_util.h"

#include "../../app/cli/text_table.h"

static char *render(const qs_ttab *t)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    qs_ttab_print(t, f);
    fclose(f);
    return buf;
}

static void test_golden(void **state)
{
    (void)state;
    qs_ttab *t = qs_ttab_new(3);
    assert_non_null(t);
    qs_ttab_row(t);
    qs_ttab_set(t, 0, "config");
    qs_ttab_set(t, 1, "PPL");
    qs_ttab_set(t, 2, "KL mean");
    qs_ttab_row(t);
    qs_ttab_set(t, 0, "reference fp32");
    qs_ttab_set(t, 1, "%s", "8.9330±0.0752");
    qs_ttab_row(t);
    qs_ttab_set(t, 0, "a=mxfp4");
    qs_ttab_set(t, 1, "%s", "115.6000±10.1400");
    qs_ttab_set(t, 2, "%s", "0.95012±0.14042");
    qs_ttab_row(t);
    qs_ttab_set(t, 0, "a=fp8_e4m3");
    qs_ttab_set(t, 1, "-");
    qs_ttab_tail(t, 2, "FAILED (62 of 62 rows non-finite): no statistics, a tail longer than every column");
    char *out = render(t);
    assert_string_equal(out,
                        "config                      PPL         KL mean\n"
                        "reference fp32    8.9330±0.0752\n"
                        "a=mxfp4        115.6000±10.1400 0.95012±0.14042\n"
                        "a=fp8_e4m3                    - FAILED (62 of 62 rows non-finite): no statistics, a tail longer than every column\n");
    free(out);
    /* a left-aligned inner column and a right-aligned first one */
    qs_ttab_align(t, 0, 0);
    qs_ttab_align(t, 2, 1);
    qs_ttab_row(t);
    qs_ttab_set(t, 0, "x");
    qs_ttab_set(t, 2, "y");
    out = render(t);
    size_t n = strlen(out);
    assert_true(n > 35);
    assert_string_equal(out + n - 35, "\n             x                  y\n");
    free(out);
    qs_ttab_free(t);
}

int main(void)
{
    const struct CMUnitTest t[] = {
        cmocka_unit_test(test_golden),
    };
    return cmocka_run_group_tests(t, NULL, NULL);
}
