/*
** qscope entry point: global options, help, and dispatch through the command table (commands.c).
*/
#include <malloc.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "cli.h"
#include "par.h"
#include "../../kernels/qs_version.h"

static void usage(FILE *f)
{
    fprintf(f,
            "qscope %s — see where low-precision number formats lose precision\n"
            "\n"
            "usage: qscope [--db PATH] [--rank-timeout SECONDS] COMMAND [ARGS]\n"
            "       qscope help COMMAND | --help | --version\n"
            "\n"
            "commands:\n", QS_VERSION);
    for (const qs_command *c = qs_commands; c->name; c++) fprintf(f, "  %-10s %s\n", c->name, c->summary);
    fprintf(f,
            "\n"
            "The database is --db PATH, else $QSCOPE_DB, else ./qscope.db (created on first use).\n"
            "Under `mpirun -np N`, a rank silent for --rank-timeout SECONDS (default %.0f; 0 = never),\n"
            "e.g. a stopped process, ends the job with one line naming it; nothing of an unfinished\n"
            "step is stored (docs/scale.md).\n"
            "Exit status: 0 success, 1 error, 2 usage error.  NO_COLOR disables colour.\n", QS_PAR_TIMEOUT_DEFAULT);
}

/* Levenshtein distance, for "did you mean": command names are short */
static size_t edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b), row[64];
    if (la >= 63 || lb >= 63) return (size_t)-1;
    for (size_t j = 0; j <= lb; j++) row[j] = j;
    for (size_t i = 1; i <= la; i++) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t up = row[j], best = diag + (a[i - 1] != b[j - 1]);
            if (up + 1 < best) best = up + 1;
            if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[lb];
}

/* One line for a name that is not a command, with the nearest command when one is close. */
static int unknown_command(const char *what, const char *name)
{
    const char *best = NULL;
    size_t bd = (size_t)-1;
    for (const qs_command *c = qs_commands; c->name; c++) {
        size_t d = edit_distance(name, c->name);
        if (d < bd) { bd = d; best = c->name; }
    }
    size_t n = strlen(name);
    if (best && bd <= (n > 4 ? 2u : 1u))
        return qs_cli_error(QS_EXIT_USAGE, "%s '%s' (did you mean '%s'?)", what, name, best);
    return qs_cli_error(QS_EXIT_USAGE, "%s '%s' (see `qscope --help`)", what, name);
}

/* `qscope help NAME [SUB]`: a command's help, or one subcommand's own (usage, what it does, its options). */
static int help_command(const char *name, const char *sub)
{
    const qs_command *c = qs_command_find(name);
    if (!c) return unknown_command("no such command", name);
    if (!sub) {
        qs_command_help(stdout, c);
        return QS_EXIT_OK;
    }
    if (!c->subs)   /* bench and plot take kinds, all described in their one help */
        return qs_cli_error(QS_EXIT_USAGE, "%s has no subcommands: no separate help for '%s' (`qscope help %s` has all of it)", name,
                            sub, name);
    const qs_subcommand *s = qs_subcommand_named(c, sub);
    if (!s) return qs_cli_error(QS_EXIT_USAGE, "%s has no subcommand '%s' (see `qscope help %s`)", name, sub, name);
    qs_subcommand_help(stdout, c, s);
    return QS_EXIT_OK;
}

/* --rank-timeout SECONDS: a whole number of seconds, 0 (never) to 10^6; a usage error otherwise. */
static int rank_timeout(const char *v, double *s)
{
    char *end = NULL;
    long n = v && *v >= '0' && *v <= '9' ? strtol(v, &end, 10) : -1;
    if (!v || n < 0 || n > 1000000 || *end)
        return qs_cli_error(QS_EXIT_USAGE, "--rank-timeout needs a whole number of seconds from 0 (none) to 1000000%s%s%s",
                            v ? ", not '" : "", v ? v : "", v ? "'" : "");
    *s = (double)n;
    return 0;
}

int main(int argc, char **argv)
{
    /* Past `ulimit -f` a write then fails with EFBIG, reported like any other, instead of a kill. */
    signal(SIGXFSZ, SIG_IGN);
    /* Under `ulimit -v`, one malloc arena: glibc reserves 64 MiB of address space for each arena a
    ** new thread takes, so whether a worker thread has malloc'd yet (timing) decided whether a
    ** streamed `quant` at 128 MiB found room for its 4 MiB write buffer (a loaded CI run failed so). */
    struct rlimit as;
    if (getrlimit(RLIMIT_AS, &as) == 0 && as.rlim_cur != RLIM_INFINITY) mallopt(M_ARENA_MAX, 1);
    qs_blas_core_fix(argc, argv);
    qs_cli cli = {0};
    cli.argc = argc;
    cli.argv = argv;
    cli.db_path = getenv("QSCOPE_DB");
    if (!cli.db_path || !*cli.db_path) cli.db_path = "qscope.db";
    const char *nc = getenv("NO_COLOR");
    cli.color = isatty(STDOUT_FILENO) && !(nc && *nc);

    int i = 1;
    for (; i < argc && argv[i][0] == '-'; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--db") == 0) {
            if (++i >= argc) return qs_cli_error(QS_EXIT_USAGE, "--db needs a path");
            cli.db_path = argv[i];
        } else if (strncmp(a, "--db=", 5) == 0) {
            cli.db_path = a + 5;
        } else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            return QS_EXIT_OK;
        } else if (strcmp(a, "--version") == 0 || strcmp(a, "-V") == 0) {
            printf("qscope %s (%s)\n", QS_VERSION, QS_GIT_REV);
            return QS_EXIT_OK;
        } else if (strcmp(a, "--no-color") == 0) {
            cli.color = 0;
        } else if (strcmp(a, "--rank-timeout") == 0 || strncmp(a, "--rank-timeout=", 15) == 0) {
            const char *v = a[14] == '=' ? a + 15 : ++i < argc ? argv[i] : NULL;
            double s = 0;
            if (rank_timeout(v, &s)) return QS_EXIT_USAGE;
            qs_par_set_timeout(s);
        } else {
            return qs_cli_error(QS_EXIT_USAGE, "unknown option '%s' (see `qscope --help`)", a);
        }
    }
    if (i >= argc) {
        /* No command: the workbench on a terminal, else the help (a script or pipe gets no
        ** database created behind its back) */
        if (isatty(STDIN_FILENO) && isatty(STDOUT_FILENO)) {
            char *targs[] = {"tui", NULL};
            return qs_cmd_tui(&cli, 1, targs);
        }
        usage(stdout);
        return QS_EXIT_OK;
    }
    const char *name = argv[i];
    if (strcmp(name, "help") == 0) {
        if (i + 1 >= argc) { usage(stdout); return QS_EXIT_OK; }
        if (i + 3 < argc) return qs_cli_error(QS_EXIT_USAGE, "help takes a command and a subcommand, not '%s'", argv[i + 3]);
        return help_command(argv[i + 1], i + 2 < argc ? argv[i + 2] : NULL);
    }
    if (strcmp(name, "version") == 0) {
        printf("qscope %s (%s)\n", QS_VERSION, QS_GIT_REV);
        return QS_EXIT_OK;
    }
    const qs_command *c = qs_command_find(name);
    if (!c) return unknown_command("unknown command", name);
    for (int k = i + 1; k < argc; k++)   /* `CMD SUB ... --help`: the subcommand's own help */
        if (strcmp(argv[k], "--help") == 0 || strcmp(argv[k], "-h") == 0)
            return help_command(name, c->subs && k > i + 1 && argv[i + 1][0] != '-' ? argv[i + 1] : NULL);
    qs_err pe = {{0}};
    if (qs_par_init(&argc, &argv, &pe)) return qs_cli_err(QS_EXIT_ERR, &pe);
    cli.argv = argv;
    cli.color = qs_par_isatty(STDOUT_FILENO) && !(nc && *nc);
    /* under mpirun, a command that does not shard its work runs on rank 0 alone */
    if (!qs_command_sharded(c, argc - i, argv + i)) {
        if (qs_par_rank() > 0) return qs_par_exit(QS_EXIT_OK);
        qs_par_alone();
    }
    return qs_par_exit(qs_command_run(&cli, c, argc - i, argv + i));
}
