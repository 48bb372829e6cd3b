/* kv_addr.cuh — where a piece of a K/V pool (one head's keys or values of
 * one block) lies in the pool's memory: kernels/attention.h's layout
 * (kv_piece), head-major in runs of 2^run_shift blocks (run_shift 0: one
 * run over the whole pool). Written in the C that NVRTC and the host's
 * compiler both read, so that test_cuda_host holds the device's addresses
 * to the CPU's, for pools of one run and of several. The includer defines
 * CV_KV_FN (kv.cuh: __device__ __forceinline__) and the types i32, i64 and
 * u8 (common.cuh). */
#pragma once

/* A pool as cuda.c passes it (its kv_dev, field for field): the first
 * field of every kernel argument that holds one, so the fake driver's
 * tests find it. */
typedef struct cv_kv {
    u8 *data;
    i64 head_bytes, block_bytes;
    i32 n_blocks, n_head_kv, head_dim, n_parts, type, qgroup, run_shift, pad;
} cv_kv;

/* Bytes from data to block b's piece of region r = (layer * n_parts + kv)
 * * n_head_kv + head: within run b >> run_shift (run_shift 0: the one run
 * of n_blocks), each region's pieces of the run's blocks in block order. */
CV_KV_FN i64 cv_kv_piece_at(const cv_kv *p, i64 r, i32 b)
{
    const int s = p->run_shift;
    if (s == 0)
        return (r * p->n_blocks + b) * p->head_bytes;
    const i64 run = b >> s, at = b & ((1 << s) - 1);
    return ((run * p->block_bytes) << s) + ((r << s) + at) * p->head_bytes;
}
/* The pieces of block b's keys and values of kv head `head` of layer
 * `layer` (kv_k, kv_v). */
CV_KV_FN i64 cv_kv_k_at_block(const cv_kv *p, i32 b, i32 layer, i32 head)
{
    return cv_kv_piece_at(p, (i64)layer * p->n_parts * p->n_head_kv + head, b);
}
CV_KV_FN i64 cv_kv_v_at_block(const cv_kv *p, i32 b, i32 layer, i32 head)
{
    return cv_kv_piece_at(p, ((i64)layer * 2 + 1) * p->n_head_kv + head, b);
}
