/*
** `qscope attn`: attention kernels against the FP64 reference over a sweep of sequence lengths
** (FA2, split-KV, AMLA, MXFP4 UOS/PNQ, KV formats, MSD decode), stored as a result of kind "attn".
*/
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "cli.h"
#include "kernel_cli.h"
#include "quant_opts.h"
#include "../../analysis/kernel_exp.h"

static double jd(json_t *o, const char *k)
{
    json_t *v = json_object_get(o, k);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

static int parse_sz(const char *s, size_t lo, size_t hi, size_t *out)
{
    unsigned long long u;
    if (qs_parse_u64(s, &u) || u < lo || u > hi) return -1;
    *out = (size_t)u;
    return 0;
}

/* --kv FORMAT[:key=value...] with the per-format options of `quant`: 0, or the usage exit code. */
static int kv_format(const char *kvname, qs_kx_attn *o, qs_apply *kvap)
{
    if (strchr(kvname, ',')) return qs_cli_usage("attn", "--kv takes one format");
    char fname[64];
    snprintf(fname, sizeof fname, "%.*s", (int)strcspn(kvname, ":"), kvname);
    if (!qs_format_find(fname)) return qs_cli_usage("attn", "unknown KV format '%s' (see `qscope formats`)", fname);
    qs_apply base, ap;
    memset(&base, 0, sizeof base);
    base.axis = 1;
    if (qs_quant_parse_list("attn", kvname, &base, &ap, 1) != 1) return QS_EXIT_USAGE;
    o->kv = ap.f;
    o->kv_o = ap.o;
    *kvap = ap;
    if (qs_format_is_minifloat_cast(o->kv)) o->kv_o.sat = 1;   /* plain casts saturate rather than overflow */
    kvap->o = o->kv_o;
    qs_err qe;
    if (qs_qopts_check(o->kv, &o->kv_o, &qe)) return qs_cli_usage("attn", "--kv %s: %s", kvname, qe.msg);
    return 0;
}

/* Stored inputs: Q is (H·Lq) x d, K is (Hkv·Lk) x d, V is (Hkv·Lk) x dv (leading dims flattened); they
** set d, dv, Lq and the one length.  0 (the matrices in *qin, *kin, *vin, owned by the caller), or the
** exit code after the message (nothing left allocated). */
static int stored_inputs(qs_cli *cli, qs_kx_attn *o, const char *tq, const char *tk, const char *tv, size_t dv,
                         char hq[33], char hk[33], char hv[33], float **qin, float **kin, float **vin)
{
    if (!tq || !tk || (!tv && !o->mla)) return qs_cli_usage("attn", "stored inputs need --q and --k, and --v unless --mla");
    qs_db *db = qs_cli_open_db(cli);
    if (!db) return QS_EXIT_ERR;
    uint64_t rq, cq, rk, ck, rv = 0, cv = 0;
    qs_err le = {{0}};
    int rc = qs_kx_load_tensor(db, "attn", tq, 65536, &rq, &cq, hq, qin, &le);
    if (!rc) rc = qs_kx_load_tensor(db, "attn", tk, 65536, &rk, &ck, hk, kin, &le);
    if (!rc && tv) rc = qs_kx_load_tensor(db, "attn", tv, 65536, &rv, &cv, hv, vin, &le);
    qs_db_close(db);
    if (rc) rc = qs_cli_err(QS_EXIT_ERR, &le);
    if (!rc && (cq != ck || rq % o->s.H || rk % o->s.Hkv || (tv && (rv != rk || (dv && cv != dv)))))
        rc = qs_cli_error(QS_EXIT_ERR, "attn: stored shapes do not fit: Q %llux%llu, K %llux%llu%s with H=%zu Hkv=%zu",
                          (unsigned long long)rq, (unsigned long long)cq, (unsigned long long)rk, (unsigned long long)ck,
                          tv ? " and V" : "", o->s.H, o->s.Hkv);
    if (!rc) {
        o->s.d = cq;
        if (tv) o->s.dv = cv;
        if (o->mla && o->s.dv > o->s.d) rc = qs_cli_usage("attn", "--mla needs dv <= d");
    }
    if (rc) {
        free(*qin); free(*kin); free(*vin);
        *qin = *kin = *vin = NULL;
        return rc;
    }
    o->lq_fixed = rq / o->s.H;
    o->Ls[0] = rk / o->s.Hkv;
    o->nL = 1;
    o->Qin = *qin; o->Kin = *kin; o->Vin = *vin;
    return 0;
}

/* The text table of a run's rows. */
static void print_table(qs_cli *cli, json_t *d, int stored, const char *hash)
{
    printf("%s%7s  %-44s %11s %11s %11s %11s %11s%s\n", qs_c_head(cli), "L", "KERNEL", "REL-L2 (S)", "MAX|D| (S)",
           "COS (S)", "REL-L2 (U)", "COS (U)", qs_c_off(cli));
    size_t i;
    json_t *r;
    json_array_foreach(json_object_get(d, "rows"), i, r) {
        json_t *a = json_object_get(r, "vs_same_inputs"), *b = json_object_get(r, "vs_unquantized");
        printf("%7lld  %-44s %11.4g %11.4g %11.8f %11.4g %11.8f\n", (long long)json_integer_value(json_object_get(r, "L")),
               json_string_value(json_object_get(r, "kernel")), jd(a, "rel_l2"), jd(a, "max_abs"), jd(a, "cosine"),
               jd(b, "rel_l2"), jd(b, "cosine"));
    }
    printf("(S) = against FP64 on the same (quantized) inputs, (U) = against FP64 on the unquantized inputs\n");
    if (stored) printf("stored as result kind attn (input %s); `qscope plot attn -o FILE.png`\n", hash);
}

int qs_cmd_attn(qs_cli *cli, int argc, char **argv)
{
    qs_kx_attn o;
    memset(&o, 0, sizeof o);
    o.s = (qs_attn_shape){4, 0, 0, 0, 128, 0};   /* Hkv 0: = H */
    o.cfg.threads = 2;
    o.dist = QS_GEN_GAUSSIAN;
    o.qscale = 1;
    o.mx = qs_format_find("mxfp4");
    o.uos_qmax = 7.25;
    o.msd_passes = 2;
    size_t Ls[64] = {256, 512, 1024, 2048}, nL = 4, lq = 0, dv = 0;
    int json = 0, store = 1, mla = 0, splits = 4, gH = 0, gG = 0, gd = 0, rc;
    const char *kvname = NULL, *tq = NULL, *tk = NULL, *tv = NULL;
    qs_apply kvap;         /* the KV format with its options (canonical JSON stored in the options) */
    memset(&kvap, 0, sizeof kvap);
    static const struct option lo[] = {
        {"q", required_argument, 0, '1'}, {"k", required_argument, 0, '2'}, {"v", required_argument, 0, '3'},
        {"L", required_argument, 0, 'L'}, {"Lq", required_argument, 0, 'q'}, {"H", required_argument, 0, 'H'},
        {"Hkv", required_argument, 0, 'G'}, {"d", required_argument, 0, 'd'}, {"dv", required_argument, 0, 'v'},
        {"mla", no_argument, 0, 'm'}, {"causal", no_argument, 0, 'c'}, {"br", required_argument, 0, 'r'},
        {"bc", required_argument, 0, 'b'}, {"splits", required_argument, 0, 'S'}, {"threads", required_argument, 0, 't'},
        {"qscale", required_argument, 0, 'Q'}, {"kv", required_argument, 0, 'k'}, {"uos-qmax", required_argument, 0, 'u'},
        {"msd-passes", required_argument, 0, 'p'}, {"dist", required_argument, 0, 'D'}, {"seed", required_argument, 0, 's'},
        {"json", no_argument, 0, 'j'}, {"no-store", no_argument, 0, 'n'}, {0, 0, 0, 0}};
    int ch;
    size_t v;
    unsigned long long u;
    optind = 1;
    opterr = 0;
    while ((ch = getopt_long(argc, argv, "", lo, NULL)) != -1) {
        switch (ch) {
        case 'L': {
            nL = 0;
            char *cp = strdup(optarg), *sv = NULL;
            for (char *t = strtok_r(cp, ",", &sv); t; t = strtok_r(NULL, ",", &sv)) {
                if (nL >= 64 || parse_sz(t, 1, 1u << 20, &Ls[nL])) { free(cp); return qs_cli_usage("attn", "bad --L list '%s' (1..2^20, at most 64)", optarg); }
                nL++;
            }
            free(cp);
            if (!nL) return qs_cli_usage("attn", "empty --L list");
            break;
        }
        case 'q': if (parse_sz(optarg, 1, 1u << 20, &lq)) return qs_cli_usage("attn", "bad --Lq '%s'", optarg); break;
        case 'H': if (parse_sz(optarg, 1, 4096, &o.s.H)) return qs_cli_usage("attn", "bad --H '%s'", optarg); gH = 1; break;
        case 'G': if (parse_sz(optarg, 1, 4096, &o.s.Hkv)) return qs_cli_usage("attn", "bad --Hkv '%s'", optarg); gG = 1; break;
        case 'd': if (parse_sz(optarg, 1, 4096, &o.s.d)) return qs_cli_usage("attn", "bad --d '%s'", optarg); gd = 1; break;
        case 'v': if (parse_sz(optarg, 1, 4096, &dv)) return qs_cli_usage("attn", "bad --dv '%s'", optarg); break;
        case 'm': mla = 1; break;
        case 'c': o.cfg.causal = 1; break;
        case 'r': if (parse_sz(optarg, 1, 4096, &o.cfg.br)) return qs_cli_usage("attn", "bad --br '%s'", optarg); break;
        case 'b': if (parse_sz(optarg, 1, 8192, &o.cfg.bc)) return qs_cli_usage("attn", "bad --bc '%s'", optarg); break;
        case 'S': if (parse_sz(optarg, 1, 1024, &v)) return qs_cli_usage("attn", "bad --splits '%s'", optarg); splits = (int)v; break;
        case 't': if (parse_sz(optarg, 1, 64, &v)) return qs_cli_usage("attn", "bad --threads '%s'", optarg); o.cfg.threads = (int)v; break;
        case 'Q': if (qs_parse_f64(optarg, &o.qscale) || !(o.qscale > 0) || o.qscale > 1e4) return qs_cli_usage("attn", "bad --qscale '%s'", optarg); break;
        case 'k': kvname = optarg; break;
        case 'u': if (qs_parse_f64(optarg, &o.uos_qmax) || !(o.uos_qmax >= 6 && o.uos_qmax <= 8)) return qs_cli_usage("attn", "--uos-qmax must be in [6, 8]"); break;
        case 'p': if (parse_sz(optarg, 0, 3, &v) || v == 1) return qs_cli_usage("attn", "--msd-passes must be 0, 2 or 3"); o.msd_passes = (int)v; break;
        case 'D': if (qs_gen_from_name(optarg, &o.dist)) return qs_cli_usage("attn", "unknown distribution '%s'", optarg); break;
        case 's': if (qs_parse_u64(optarg, &u)) return qs_cli_usage("attn", "bad --seed '%s'", optarg); o.seed = u; break;
        case '1': tq = optarg; break;
        case '2': tk = optarg; break;
        case '3': tv = optarg; break;
        case 'j': json = 1; break;
        case 'n': store = 0; break;
        default: return qs_cli_usage("attn", "unexpected argument '%s'", argv[optind - 1]);
        }
    }
    if (optind < argc) return qs_cli_usage("attn", "unexpected argument '%s'", argv[optind]);
    if (mla) {   /* the preset fills what was not given explicitly */
        if (!gH) o.s.H = 16;
        if (!gG) o.s.Hkv = 1;
        if (!gd) o.s.d = 576;
        o.mla = 1;
        if (!lq) lq = 1;
        if (!dv) dv = 512;
    }
    if (!o.s.Hkv) o.s.Hkv = o.s.H;
    o.s.dv = dv ? dv : o.s.d;
    if (o.mla && o.s.dv > o.s.d) return qs_cli_usage("attn", "--mla needs dv <= d");
    if (o.s.H % o.s.Hkv) return qs_cli_usage("attn", "--H must be a multiple of --Hkv");
    o.lq_fixed = lq;
    o.Ls = Ls;
    o.nL = nL;
    o.cfg.splits = splits;
    if (kvname && (rc = kv_format(kvname, &o, &kvap))) return rc;
    /* stored inputs instead of generated ones */
    float *qin = NULL, *kin = NULL, *vin = NULL;
    char hq[33] = "", hk[33] = "", hv[33] = "";
    if ((tq || tk || tv) && (rc = stored_inputs(cli, &o, tq, tk, tv, dv, hq, hk, hv, &qin, &kin, &vin))) return rc;
    lq = o.lq_fixed;
    nL = o.nL;
    json_t *Lj = json_array();
    for (size_t i = 0; i < nL; i++) json_array_append_new(Lj, json_integer((json_int_t)Ls[i]));
    json_t *spec = json_pack("{s:s,s:s,s:I,s:o,s:I,s:I,s:I,s:I,s:I,s:b,s:f}", "kind", "attn", "dist", qs_gen_name(o.dist), "seed",
                             (json_int_t)o.seed, "L", Lj, "Lq", (json_int_t)lq, "H", (json_int_t)o.s.H, "Hkv",
                             (json_int_t)o.s.Hkv, "d", (json_int_t)o.s.d, "dv", (json_int_t)o.s.dv, "mla", o.mla, "qscale",
                             o.qscale);
    if (tq) {   /* keyed by the stored tensors' content hashes (and the shape interpretation) */
        json_object_set_new(spec, "tensors", json_pack("{s:s,s:s,s:s}", "q", hq, "k", hk, "v", tv ? hv : "(K)"));
        json_object_del(spec, "dist");
        json_object_del(spec, "seed");
    }
    char *st = qs_kx_canon(spec), hash[33];
    qs_kx_hash_text(st ? st : "", hash);
    free(st);
    json_t *opts = json_pack("{s:o,s:b,s:I,s:I,s:i,s:s,s:f,s:i,s:s}", "input", spec, "causal", o.cfg.causal, "br",
                             (json_int_t)(o.cfg.br ? o.cfg.br : 128), "bc", (json_int_t)(o.cfg.bc ? o.cfg.bc : 256), "splits",
                             splits, "kv", kvname ? kvname : "", "uos_qmax", o.uos_qmax, "msd_passes", o.msd_passes, "mx_format",
                             o.mx ? o.mx->name : "");
    if (kvap.f) {
        char *kvopts = qs_quant_opts_json(&kvap);
        json_t *ko = kvopts ? json_loads(kvopts, 0, NULL) : NULL;
        if (ko) json_object_set_new(opts, "kv_options", ko);
        free(kvopts);
    }
    qs_err e = {{0}};
    if (!json)
        fprintf(stderr, "qscope: attn: H=%zu Hkv=%zu d=%zu dv=%zu%s%s, %zu lengths ...\n", o.s.H, o.s.Hkv, o.s.d, o.s.dv,
                o.mla ? " (MLA decode)" : "", o.cfg.causal ? " causal" : "", nL);
    json_t *d = qs_kx_attn_run(&o, opts, &e);
    free(qin); free(kin); free(vin);
    if (!d) { json_decref(opts); return qs_cli_err(QS_EXIT_ERR, &e); }
    rc = QS_EXIT_OK;
    if (store) {
        qs_db *db = qs_cli_open_db(cli);
        int64_t id;
        if (!db) rc = QS_EXIT_ERR;
        else if (qs_kx_store(db, hash, "attn", kvname ? kvname : "fp32", opts, d, &id, &e)) rc = qs_cli_err(QS_EXIT_ERR, &e);
        qs_db_close(db);
    }
    if (json) {
        char *s = json_dumps(d, JSON_INDENT(2) | JSON_REAL_PRECISION(10));
        puts(s);
        free(s);
    } else {
        print_table(cli, d, store && rc == QS_EXIT_OK, hash);
    }
    json_decref(d);
    json_decref(opts);
    return rc;
}

int qs_cmd_resq(qs_cli *cli, int argc, char **argv);
