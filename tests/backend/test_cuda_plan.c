/* test_cuda_plan — the memory planner (--gpu-memory auto, --gpu-layers,
 * --cpu-moe) on the real shapes: llama3.1-8b (dense), qwen3-30b-a3b (MoE)
 * and gpt-oss-20b (MoE, window layers, MXFP4 experts with biases), each a
 * sparse synthetic file (the full tensor index, no data: synth's
 * .sparse) read through the serve command's cv_offload_need_from_model.
 * Every number below is worked out by hand from the model's published
 * config and the GGUF block sizes (Q8_0: 34 bytes a 32 values, MXFP4: 17),
 * not from the code under test. */
#include <stdlib.h>
#include <unistd.h>

#include "cli/offload.h"
#include "model/synth.h"
#include "test.h"

#define GiB ((size_t)1 << 30)
#define MiB ((size_t)1 << 20)

static char g_dir[64];

typedef struct model_need {
    cv_offload_need need;
    cv_gguf *g;
} model_need;

static bool need_of(const char *arch, const char *shape, const char *mix, model_need *out)
{
    char path[160];
    snprintf(path, sizeof path, "%s/%s-%s.gguf", g_dir, shape, mix);
    cv_synth_params p = { .arch = arch, .shape = shape, .dtype = mix, .seed = 1, .sparse = true };
    cv_err err = { 0 };
    cv_model_summary s;
    bool ok = cv_model_synth(&p, path, &err) == 0 && cv_gguf_open(path, &out->g, &err) == 0 &&
              cv_model_summarize(out->g, &s, &err) == 0 &&
              cv_offload_need_from_model(out->g, &s, CV_GGML_F16, &out->need, &err) == 0;
    CHECK_MSG(ok, "%s %s %s: %s", arch, shape, mix, err.msg);
    unlink(path); /* the mapping stays valid */
    return ok;
}

static void need_free(model_need *m)
{
    free(m->need.layers);
    cv_gguf_close(m->g);
}

/* A card of `total` bytes with `free_b` free, the rest as serve's defaults
 * (a batch of 256 tokens, a logit row a sequence). */
static cv_offload_opts card(size_t total, size_t free_b, int32_t n_ctx, int32_t n_seq)
{
    return (cv_offload_opts){ .device_total = total, .device_free = free_b, .gpu_layers = -1, .n_ctx = n_ctx,
                              .n_seq = n_seq, .batch_tokens = 256, .logit_rows = n_seq };
}

/* auto's budget: free minus max(512 MiB, 5% of the card) */
static size_t auto_budget(size_t total, size_t free_b) { return free_b - CV_MAX(512 * MiB, total / 20); }

/* ---- llama3.1-8b, Q8_0 ----
 * layer: attn_q 4096 x 4096 and attn_output 4096 x 4096 (4096 rows of
 * 4352 bytes each: 17,825,792), attn_k and attn_v 1024 x 4096 (4,456,448),
 * ffn_gate/up 14336 x 4096 and ffn_down 4096 x 14336 (62,390,272 each),
 * two norms of 4096 f32 (16,384 each) = 231,768,064.
 * token_embd and output 128256 x 4352 = 558,170,112; output_norm 16,384;
 * rope_freqs 64 f32 = 256.
 * KV a position a layer: K and V of 8 heads x 128 in f16 = 4096.
 * scratch a token: rows 4*4096 + 4096 (q) + 2*1024 (k, v) + 2*14336 (gate,
 * up) = 51,200 f32, and the widest input 14336 quantized (448 blocks x 48)
 * = 4*51,200 + 21,504 = 226,304; logits 128256 x 4 = 513,024; attention
 * 32 heads x 32 splits x (128 + 2) x 4 = 532,480 a sequence. */
#define L8B 231768064ull
#define OUT8B (558170112ull + 16384 + 256)

TEST(llama8b_needs_what_its_config_says)
{
    model_need m;
    if (!need_of("llama", "llama3.1-8b", "q8_0", &m))
        return;
    const cv_offload_need *n = &m.need;
    CHECK_EQ_INT(n->n_layer, 32);
    for (int il = 0; il < 32; il++) {
        CHECK_EQ_INT(n->layers[il].weights, L8B);
        CHECK_EQ_INT(n->layers[il].experts, 0);
        CHECK_EQ_INT(n->layers[il].kv_pos_bytes, 4096);
        CHECK_EQ_INT(n->layers[il].kv_window, 0);
        CHECK_EQ_INT(n->layers[il].state_bytes, 0);
    }
    CHECK_EQ_INT(n->embd_bytes, 558170112);
    CHECK_EQ_INT(n->output_bytes, OUT8B);
    CHECK(!n->tied);
    CHECK_EQ_INT(n->act_bytes_per_token, 226304);
    CHECK_EQ_INT(n->logit_row_bytes, 513024);
    CHECK_EQ_INT(n->attn_bytes_per_seq, 532480);
    need_free(&m);
}

TEST(llama8b_fits_a_24g_card_at_8k)
{
    model_need m;
    if (!need_of("llama", "llama3.1-8b", "q8_0", &m))
        return;
    cv_offload_plan p;
    cv_offload_opts o = card(24 * GiB, 23 * GiB + GiB / 2, 8192, 1);
    CHECK_EQ_INT(cv_offload_plan_make(&m.need, &o, &p, NULL), 0);
    CHECK(p.fits && p.auto_chosen && p.output_on_device);
    CHECK_EQ_INT(p.gpu_first, 0);
    CHECK_EQ_INT(p.n_cpu_moe, 0);
    CHECK_EQ_INT(p.dev_weights, 32 * L8B + OUT8B);                /* 7,974,764,800 */
    CHECK_EQ_INT(p.dev_kv, 32ull * 4096 * 8192);                   /* 1 GiB */
    CHECK_EQ_INT(p.dev_scratch, 256ull * 226304 + 513024 + 532480); /* 58,979,328 */
    CHECK_EQ_INT(p.host_weights, 558170112);                      /* the embedding only */
    CHECK_EQ_INT(p.budget, auto_budget(24 * GiB, 23 * GiB + GiB / 2));
    need_free(&m);
}

TEST(llama8b_at_32k_x4_drops_its_first_layer)
{
    model_need m;
    if (!need_of("llama", "llama3.1-8b", "q8_0", &m))
        return;
    /* all: 7,974,764,800 + KV 32 x 4096 x 32768 x 4 = 17,179,869,184 +
     * scratch 57,933,824 + 4 x 513,024 + 4 x 532,480 = 25,216,749,824 >
     * the budget 25,232,932,864 - 1,288,490,188 = 23,944,442,676; without
     * the output (558,186,752 and 3 logit rows) still over; without layer 0
     * (231,768,064 + 536,870,912 of KV) 23,887,872,000: fits. */
    cv_offload_plan p;
    cv_offload_opts o = card(24 * GiB, 23 * GiB + GiB / 2, 32768, 4);
    CHECK_EQ_INT(cv_offload_plan_make(&m.need, &o, &p, NULL), 0);
    CHECK_EQ_INT(p.budget, 23944442676ull);
    CHECK(p.fits && !p.output_on_device);
    CHECK_EQ_INT(p.gpu_first, 1);
    CHECK_EQ_INT(p.dev_weights, 31 * L8B);
    CHECK_EQ_INT(p.dev_kv, 31ull * 4096 * 32768 * 4);
    CHECK_EQ_INT(p.dev_scratch, 256ull * 226304 + 4 * 532480);
    CHECK_EQ_INT(p.dev_total, 23887872000ull);
    CHECK_EQ_INT(p.host_weights, 558170112ull + L8B + OUT8B);
    CHECK_EQ_INT(p.host_kv, 4096ull * 32768 * 4);
    cv_buf d = { 0 };
    cv_offload_plan_describe(&p, &d);
    CHECK_MSG(strstr(d.data, "chosen: layers 1-31 of 32 on the device (--gpu-layers 31)"), "%s", d.data);
    cv_buf_free(&d);
    need_free(&m);
}

TEST(gpu_layers_as_asked_even_when_it_does_not_fit)
{
    model_need m;
    if (!need_of("llama", "llama3.1-8b", "q8_0", &m))
        return;
    cv_offload_plan p;
    cv_offload_opts o = card(8 * GiB, 7 * GiB, 8192, 1);
    o.gpu_layers = 10;
    CHECK_EQ_INT(cv_offload_plan_make(&m.need, &o, &p, NULL), 0);
    CHECK(!p.auto_chosen && p.fits && !p.output_on_device);
    CHECK_EQ_INT(p.gpu_first, 22);
    CHECK_EQ_INT(p.dev_weights, 10 * L8B);
    CHECK_EQ_INT(p.dev_kv, 10ull * 4096 * 8192);
    /* all 32 and the output on an 8 GiB card: 7,974,764,800 + 1 GiB + ... */
    o.gpu_layers = 32;
    CHECK_EQ_INT(cv_offload_plan_make(&m.need, &o, &p, NULL), 0);
    CHECK(!p.fits && p.output_on_device);
    cv_buf d = { 0 };
    cv_offload_plan_describe(&p, &d);
    CHECK_MSG(strstr(d.data, "as asked: all 32 layers and the output on the device") && strstr(d.data, "DOES NOT FIT"),
              "%s", d.data);
    cv_buf_free(&d);
    /* --gpu-memory: the budget given, never more than is free */
    o = card(24 * GiB, 20 * GiB, 8192, 1);
    o.budget = 4 * GiB;
    CHECK_EQ_INT(cv_offload_plan_make(&m.need, &o, &p, NULL), 0);
    CHECK_EQ_INT(p.budget, 4 * GiB);
    /* 4 GiB - scratch 57,933,824 - 532,480 = 4,236,500,992 for layers of
     * 231,768,064 + 33,554,432 of KV each: 15 */
    CHECK_EQ_INT(p.gpu_first, 32 - 15);
    o.budget = 64 * GiB;
    CHECK_EQ_INT(cv_offload_plan_make(&m.need, &o, &p, NULL), 0);
    CHECK_EQ_INT(p.budget, 20 * GiB);
    o.gpu_layers = 33;
    CHECK_EQ_INT(cv_offload_plan_make(&m.need, &o, &p, NULL), CV_EINVAL);
    need_free(&m);
}

/* ---- qwen3-30b-a3b, Q8_0 ----
 * layer: attn_q 4096 x 2048 and attn_output 2048 x 4096 (8,912,896 each),
 * attn_k/v 512 x 2048 (1,114,112 each), the router 128 x 2048 f32
 * (1,048,576), attn_norm and ffn_norm (8,192 each), q/k norms (512 each) =
 * 21,120,000; experts: gate/up 128 x 768 x 2048 and down 128 x 2048 x 768
 * (213,909,504 each) = 641,728,512.
 * token_embd and output 151936 x 2176 = 330,612,736; output_norm 8,192.
 * KV 2 x 4 heads x 128 x 2 = 2048 a position a layer. Scratch a token:
 * rows 4*2048 + 4096 + 2*512 + 2*6144 = 25,600 f32 and 6144 quantized
 * (9,216) = 111,616; logits 151936 x 4 = 607,744; attention 532,480. */
#define L30 21120000ull
#define E30 641728512ull
#define OUT30 (330612736ull + 8192)

TEST(qwen3_30b_keeps_the_experts_of_18_layers_in_ram_on_24g)
{
    model_need m;
    if (!need_of("qwen3moe", "qwen3-30b-a3b", "q8_0", &m))
        return;
    const cv_offload_need *n = &m.need;
    CHECK_EQ_INT(n->n_layer, 48);
    for (int il = 0; il < 48; il++) {
        CHECK_EQ_INT(n->layers[il].weights, L30);
        CHECK_EQ_INT(n->layers[il].experts, E30);
        CHECK_EQ_INT(n->layers[il].kv_pos_bytes, 2048);
    }
    CHECK_EQ_INT(n->output_bytes, OUT30);
    CHECK_EQ_INT(n->act_bytes_per_token, 111616);
    CHECK_EQ_INT(n->logit_row_bytes, 607744);
    /* all of it: 48 x 662,848,512 = 31.8 GB, over any 24 GiB card. Without
     * experts: 1,013,760,000 + 330,620,928 + KV 3,221,225,472 + scratch
     * 29,713,920 = 4,595,320,320, leaving 19,349,122,356 of the budget
     * 23,944,442,676 for experts: 30 layers' (19,251,855,360), not 31. */
    cv_offload_plan p;
    cv_offload_opts o = card(24 * GiB, 23 * GiB + GiB / 2, 32768, 1);
    CHECK_EQ_INT(cv_offload_plan_make(n, &o, &p, NULL), 0);
    CHECK(p.fits && p.auto_chosen && p.output_on_device);
    CHECK_EQ_INT(p.gpu_first, 0);
    CHECK_EQ_INT(p.n_cpu_moe, 18);
    CHECK_EQ_INT(p.dev_weights, 48 * L30 + 30 * E30 + OUT30);
    CHECK_EQ_INT(p.dev_kv, 48ull * 2048 * 32768);
    CHECK_EQ_INT(p.dev_scratch, 256ull * 111616 + 607744 + 532480);
    CHECK_EQ_INT(p.host_weights, 18 * E30 + 330612736ull);
    cv_buf d = { 0 };
    cv_offload_plan_describe(&p, &d);
    CHECK_MSG(strstr(d.data, "chosen: all 48 layers and the output on the device, the routed experts of layers "
                             "0-17 in host RAM"),
              "%s", d.data);
    cv_buf_free(&d);
    /* --cpu-moe on a 12 GiB card: everything but the experts, 4.6 GB */
    o = card(12 * GiB, 11 * GiB + GiB / 2, 32768, 1);
    o.cpu_moe = true;
    CHECK_EQ_INT(cv_offload_plan_make(n, &o, &p, NULL), 0);
    CHECK(p.fits && p.output_on_device);
    CHECK_EQ_INT(p.n_cpu_moe, 48);
    CHECK_EQ_INT(p.dev_total, 4595320320ull);
    CHECK_EQ_INT(p.host_weights, 48 * E30 + 330612736ull);
    cv_offload_plan_describe(&p, &d);
    CHECK_MSG(strstr(d.data, "all 48 layers and the output on the device, their routed experts in host RAM "
                             "(--cpu-moe)"),
              "%s", d.data);
    cv_buf_free(&d);
    need_free(&m);
}

/* ---- gpt-oss-20b, MXFP4 experts, Q8_0 elsewhere ----
 * layer: attn_q 4096 x 2880 and attn_output 2880 x 4096 (12,533,760 each:
 * 90 blocks of 34 = 3060 bytes a 2880 row, 4352 a 4096 one), attn_k/v
 * 512 x 2880 (1,566,720 each), q/k/v biases (16,384, 2,048, 2,048),
 * attn_output bias, attn_norm, post_attention_norm (11,520 each), sinks
 * 64 f32 (256), router 32 x 2880 f32 (368,640) and its bias (128) =
 * 28,625,024; experts: gate/up/down 32 x 2880 x 2880 in MXFP4 (90 blocks
 * of 17 = 1530 bytes a row: 141,004,800 each) and their biases (32 x 2880
 * f32 = 368,640 each) = 424,120,320.
 * token_embd and output 201088 x 3060 = 615,329,280; output_norm 11,520.
 * KV 2 x 8 x 64 x 2 = 2048; even layers keep a 128-position window.
 * Scratch a token: rows 4*2880 + 4096 + 2*512 + 2*4*2880 = 39,680 f32 and
 * 4096 quantized (6,144) = 164,864; logits 804,352; attention 64 x 32 x
 * (64 + 2) x 4 = 540,672. */
#define LOSS 28625024ull
#define EOSS 424120320ull
#define OUTOSS (615329280ull + 11520)

TEST(gpt_oss_20b_fits_16g_and_splits_12g)
{
    model_need m;
    if (!need_of("gpt-oss", "gpt-oss-20b", "mxfp4", &m))
        return;
    const cv_offload_need *n = &m.need;
    CHECK_EQ_INT(n->n_layer, 24);
    for (int il = 0; il < 24; il++) {
        CHECK_EQ_INT(n->layers[il].weights, LOSS);
        CHECK_EQ_INT(n->layers[il].experts, EOSS);
        CHECK_EQ_INT(n->layers[il].kv_pos_bytes, 2048);
        CHECK_EQ_INT(n->layers[il].kv_window, il % 2 == 0 ? 128 : 0);
    }
    CHECK_EQ_INT(n->output_bytes, OUTOSS);
    CHECK_EQ_INT(n->act_bytes_per_token, 164864);
    CHECK_EQ_INT(n->attn_bytes_per_seq, 540672);
    /* 131072 positions: weights 24 x 452,745,344 + 615,340,800 =
     * 11,481,229,056; KV 12 x 2048 x 131072 + 12 x 2048 x 128 =
     * 3,224,371,200; scratch 42,205,184 + 804,352 + 540,672 = 43,550,208;
     * 14,749,150,464 <= 16,106,127,360 - 858,993,459. */
    cv_offload_plan p;
    cv_offload_opts o = card(16 * GiB, 15 * GiB, 131072, 1);
    CHECK_EQ_INT(cv_offload_plan_make(n, &o, &p, NULL), 0);
    CHECK(p.fits && p.output_on_device);
    CHECK_EQ_INT(p.n_cpu_moe, 0);
    CHECK_EQ_INT(p.dev_kv, 3224371200ull);
    CHECK_EQ_INT(p.dev_total, 14749150464ull);
    /* 12 GiB: budget 11,703,785,882; without experts 4,570,262,784, so
     * 16 layers' experts fit (6,785,925,120), 17 do not: 8 stay in RAM */
    o = card(12 * GiB, 11 * GiB + GiB / 2, 131072, 1);
    CHECK_EQ_INT(cv_offload_plan_make(n, &o, &p, NULL), 0);
    CHECK(p.fits);
    CHECK_EQ_INT(p.budget, 11703785882ull);
    CHECK_EQ_INT(p.n_cpu_moe, 8);
    CHECK_EQ_INT(p.dev_total, 4570262784ull + 16 * EOSS);
    need_free(&m);
}

TEST(nothing_fits_a_tiny_card)
{
    model_need m;
    if (!need_of("llama", "llama3.1-8b", "q8_0", &m))
        return;
    cv_offload_plan p;
    cv_offload_opts o = card(1 * GiB, 700 * MiB, 8192, 1);
    CHECK_EQ_INT(cv_offload_plan_make(&m.need, &o, &p, NULL), 0);
    CHECK(p.fits && p.auto_chosen);
    CHECK_EQ_INT(p.gpu_first, 32);
    CHECK_EQ_INT(p.dev_total, 0);
    cv_buf d = { 0 };
    cv_offload_plan_describe(&p, &d);
    CHECK_MSG(strstr(d.data, "chosen: nothing on the device"), "%s", d.data);
    cv_buf_free(&d);
    need_free(&m);
}

int main(void)
{
    snprintf(g_dir, sizeof g_dir, "/tmp/cv_cuda_plan_XXXXXX");
    if (!mkdtemp(g_dir))
        return 1;
    RUN(llama8b_needs_what_its_config_says);
    RUN(llama8b_fits_a_24g_card_at_8k);
    RUN(llama8b_at_32k_x4_drops_its_first_layer);
    RUN(gpu_layers_as_asked_even_when_it_does_not_fit);
    RUN(qwen3_30b_keeps_the_experts_of_18_layers_in_ram_on_24g);
    RUN(gpt_oss_20b_fits_16g_and_splits_12g);
    RUN(nothing_fits_a_tiny_card);
    rmdir(g_dir);
    return test_report();
}
