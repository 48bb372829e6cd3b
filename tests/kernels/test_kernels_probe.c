/* test_kernels_probe.c — the machine probes corvid bench and doctor measure
 * against: the read bandwidth, and the int8 peak of every ISA level, which
 * must measure a rate on each level this CPU runs and refuse, naming why,
 * each it does not (and scalar, which has no int8 instruction). Rates are
 * only checked to be positive and finite: timings belong to benchmarks. */
#include "kernels/kernels.h"
#include "test.h"

TEST(int8_peak_measures_every_level_this_cpu_runs_and_names_why_not_the_others)
{
    cv_err err = { 0 };
    cv_pool *pool = cv_pool_create(1, &err);
    CHECK_MSG(pool != NULL, "%s", err.msg);
    if (!pool)
        return;
    for (int l = CV_ISA_SCALAR; l < CV_ISA_COUNT; l++) {
        cv_probe_result r;
        err = (cv_err){ 0 };
        const int rc = cv_probe_int8_peak(pool, l, &r, &err);
        if (l != CV_ISA_SCALAR && cv_isa_supported(l)) {
            CHECK_MSG(rc == 0, "%s: %s", cv_isa_name(l), err.msg);
            CHECK_MSG(r.value > 0 && isfinite(r.value) && r.best >= r.value && r.work > 0, "%s: %g (best %g)",
                      cv_isa_name(l), r.value, r.best);
            printf("  %s: %.1f GMAC/s (%s)\n", cv_isa_name(l), r.value / 1e9, cv_probe_int8_what(l));
        } else {
            CHECK_EQ_INT(rc, CV_EUNSUPPORTED);
            CHECK_MSG(strstr(err.msg, cv_isa_name(l)) != NULL, "%s: %s", cv_isa_name(l), err.msg);
            if (l != CV_ISA_SCALAR)
                printf("  %s: not on this CPU (%s)\n", cv_isa_name(l), cv_isa_missing(l));
        }
    }
    cv_pool_destroy(pool);
}

TEST(read_bandwidth_reads_at_a_positive_rate)
{
    cv_err err = { 0 };
    cv_pool *pool = cv_pool_create(1, &err);
    CHECK_MSG(pool != NULL, "%s", err.msg);
    if (!pool)
        return;
    cv_probe_result r;
    CHECK_EQ_INT(cv_probe_read_bandwidth(pool, &r, &err), 0);
    CHECK(r.value > 0 && isfinite(r.value) && r.work == 256u << 20);
    cv_pool_destroy(pool);
}

int main(void)
{
    RUN(int8_peak_measures_every_level_this_cpu_runs_and_names_why_not_the_others);
    RUN(read_bandwidth_reads_at_a_positive_rate);
    return test_report();
}
