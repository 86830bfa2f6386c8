/* The compiled batch pipeline's C side: Kafka's record-batch codecs, CRC-32C, the v2 batch header, and one worker
 * thread that closes batches without the GIL.
 *
 * Everything here is byte work on buffers the Python side owns and keeps alive; nothing touches a Python object.
 * The rules it follows are stated once in Python (aioproducer/compression.py for each codec's framing and levels,
 * aioproducer/records/layout.py for the header, aioproducer/records/builder.py for "send uncompressed when
 * compression does not shrink"); the test suite compares the bytes written here with the pure-Python twin's.
 * A codec is compiled in only when its library's header was found at build time (AIOPRODUCER_HAVE_LZ4, _ZSTD,
 * _SNAPPY; zlib is always there): `apn_native_codec` says which.
 */
#ifndef AIOPRODUCER_NATIVE_H
#define AIOPRODUCER_NATIVE_H

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#ifdef AIOPRODUCER_HAVE_LZ4
#include <lz4frame.h>
#endif
#ifdef AIOPRODUCER_HAVE_ZSTD
#include <zstd.h>
#endif
#ifdef AIOPRODUCER_HAVE_SNAPPY
#include <snappy-c.h>
#endif
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#include <nmmintrin.h>
#define APN_X86_CRC 1
#endif

/* Codec ids: bits 0-2 of a batch's attributes (CompressionType). */
enum { APN_NONE = 0, APN_GZIP = 1, APN_SNAPPY = 2, APN_LZ4 = 3, APN_ZSTD = 4 };
enum { APN_HEADER_SIZE = 61, APN_CRC_START = 21, APN_LENGTH_FIELD_END = 12, APN_MAGIC = 2 };
enum { APN_TRANSACTIONAL_BIT = 0x10 };

/* ---- CRC-32C (Castagnoli, reflected 0x82F63B78), as the crc32c package computes it ------------------------------ */

static uint32_t apn_crc_table[8][256];
static int apn_crc_hardware = -1; /* -1: not probed yet */
static pthread_once_t apn_crc_once = PTHREAD_ONCE_INIT;

static void apn_crc_init(void) {
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t crc = n;
        for (int k = 0; k < 8; k++) crc = crc & 1 ? (crc >> 1) ^ 0x82F63B78u : crc >> 1;
        apn_crc_table[0][n] = crc;
    }
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t crc = apn_crc_table[0][n];
        for (int t = 1; t < 8; t++) {
            crc = apn_crc_table[0][crc & 0xFF] ^ (crc >> 8);
            apn_crc_table[t][n] = crc;
        }
    }
#ifdef APN_X86_CRC
    unsigned int eax, ebx, ecx, edx;
    apn_crc_hardware = __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_SSE4_2) ? 1 : 0;
#else
    apn_crc_hardware = 0;
#endif
}

static uint32_t apn_crc_software(uint32_t crc, const uint8_t *p, size_t n) {
    while (n && ((uintptr_t)p & 7)) {
        crc = apn_crc_table[0][(crc ^ *p++) & 0xFF] ^ (crc >> 8);
        n--;
    }
    while (n >= 8) { /* slicing by 8 */
        uint64_t word;
        memcpy(&word, p, 8);
        word ^= crc; /* little-endian: the low byte is the first */
        crc = apn_crc_table[7][word & 0xFF] ^ apn_crc_table[6][(word >> 8) & 0xFF] ^
              apn_crc_table[5][(word >> 16) & 0xFF] ^ apn_crc_table[4][(word >> 24) & 0xFF] ^
              apn_crc_table[3][(word >> 32) & 0xFF] ^ apn_crc_table[2][(word >> 40) & 0xFF] ^
              apn_crc_table[1][(word >> 48) & 0xFF] ^ apn_crc_table[0][word >> 56];
        p += 8;
        n -= 8;
    }
    while (n--) crc = apn_crc_table[0][(crc ^ *p++) & 0xFF] ^ (crc >> 8);
    return crc;
}

#ifdef APN_X86_CRC
__attribute__((target("sse4.2"))) static uint32_t apn_crc_sse42(uint32_t crc, const uint8_t *p, size_t n) {
    uint64_t c = crc;
    while (n && ((uintptr_t)p & 7)) {
        c = _mm_crc32_u8((uint32_t)c, *p++);
        n--;
    }
    while (n >= 8) {
        uint64_t word;
        memcpy(&word, p, 8);
        c = _mm_crc32_u64(c, word);
        p += 8;
        n -= 8;
    }
    while (n--) c = _mm_crc32_u8((uint32_t)c, *p++);
    return (uint32_t)c;
}
#endif

/* The CRC-32C of `n` bytes, continuing from `crc` (0 to start): crc32c.crc32c(data, crc). */
static uint32_t apn_crc32c(uint32_t crc, const uint8_t *p, size_t n) {
    pthread_once(&apn_crc_once, apn_crc_init);
    crc = ~crc;
#ifdef APN_X86_CRC
    if (apn_crc_hardware) return ~apn_crc_sse42(crc, p, n);
#endif
    return ~apn_crc_software(crc, p, n);
}

/* ---- codecs ------------------------------------------------------------------------------------------------------ */

static int apn_native_codec(int codec) {
    switch (codec) {
        case APN_NONE:
        case APN_GZIP:
            return 1;
#ifdef AIOPRODUCER_HAVE_SNAPPY
        case APN_SNAPPY:
            return 1;
#endif
#ifdef AIOPRODUCER_HAVE_LZ4
        case APN_LZ4:
            return 1;
#endif
#ifdef AIOPRODUCER_HAVE_ZSTD
        case APN_ZSTD:
            return 1;
#endif
        default:
            return 0;
    }
}

#ifdef AIOPRODUCER_HAVE_LZ4
/* KIP-57 framing as Java's Lz4BlockOutputStream writes it (compression.py's _lz4_compress): 64 KiB independent
 * blocks, no block or content checksum, no content size; level 0 is lz4's fast mode. */
static void apn_lz4_preferences(LZ4F_preferences_t *prefs, int level) {
    memset(prefs, 0, sizeof(*prefs));
    prefs->frameInfo.blockSizeID = LZ4F_max64KB;
    prefs->frameInfo.blockMode = LZ4F_blockIndependent;
    prefs->frameInfo.contentChecksumFlag = LZ4F_noContentChecksum;
    prefs->frameInfo.blockChecksumFlag = LZ4F_noBlockChecksum;
    prefs->frameInfo.contentSize = 0;
    prefs->compressionLevel = level;
}
#endif

/* Java's SnappyOutputStream (xerial) framing (compression.py's _snappy_compress). */
static const uint8_t APN_XERIAL_HEADER[16] = {0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0, 0, 0, 0, 1, 0, 0, 0, 1};
enum { APN_XERIAL_BLOCK = 32 * 1024 };

static void apn_put32(uint8_t *out, uint32_t v) {
    out[0] = (uint8_t)(v >> 24);
    out[1] = (uint8_t)(v >> 16);
    out[2] = (uint8_t)(v >> 8);
    out[3] = (uint8_t)v;
}

/* Bytes enough for `n` bytes compressed with `codec` (and never fewer than `n`: an incompressible section is
 * copied as it is). 0 for a codec not compiled in. */
static size_t apn_bound(int codec, int level, size_t n) {
    size_t bound = 0;
    switch (codec) {
        case APN_NONE:
            bound = n;
            break;
        case APN_GZIP:
            bound = compressBound((uLong)n) + 32; /* zlib's bound plus the gzip header and trailer */
            break;
#ifdef AIOPRODUCER_HAVE_SNAPPY
        case APN_SNAPPY:
            bound = sizeof(APN_XERIAL_HEADER) + (n / APN_XERIAL_BLOCK + 1) * (4 + snappy_max_compressed_length(APN_XERIAL_BLOCK));
            break;
#endif
#ifdef AIOPRODUCER_HAVE_LZ4
        case APN_LZ4: {
            LZ4F_preferences_t prefs;
            apn_lz4_preferences(&prefs, level);
            bound = LZ4F_compressFrameBound(n, &prefs);
            break;
        }
#endif
#ifdef AIOPRODUCER_HAVE_ZSTD
        case APN_ZSTD:
            bound = ZSTD_compressBound(n);
            break;
#endif
        default:
            return 0;
    }
    (void)level;
    return bound > n ? bound : n;
}

/* What a worker keeps between batches (a zstd context; the others need none). */
typedef struct {
#ifdef AIOPRODUCER_HAVE_ZSTD
    ZSTD_CCtx *zstd;
#endif
    int unused;
} apn_codec_state;

static void apn_codec_state_free(apn_codec_state *state) {
#ifdef AIOPRODUCER_HAVE_ZSTD
    if (state->zstd) ZSTD_freeCCtx(state->zstd);
    state->zstd = NULL;
#endif
    (void)state;
}

/* Compress `n` bytes into `dst` (room for `cap`): 0 and the length in `*out`, or -1. */
static int apn_compress(apn_codec_state *state, int codec, int level, const uint8_t *src, size_t n, uint8_t *dst,
                        size_t cap, size_t *out) {
    switch (codec) {
        case APN_GZIP: {
            z_stream stream;
            memset(&stream, 0, sizeof(stream));
            /* As zlib.compressobj(level, DEFLATED, 16 + MAX_WBITS): a gzip container, memLevel 8. */
            if (deflateInit2(&stream, level, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) != Z_OK) return -1;
            stream.next_in = (Bytef *)src;
            stream.avail_in = (uInt)n;
            stream.next_out = dst;
            stream.avail_out = (uInt)cap;
            int result = deflate(&stream, Z_FINISH);
            *out = cap - stream.avail_out;
            deflateEnd(&stream);
            return result == Z_STREAM_END ? 0 : -1;
        }
#ifdef AIOPRODUCER_HAVE_SNAPPY
        case APN_SNAPPY: {
            size_t pos = sizeof(APN_XERIAL_HEADER);
            if (cap < pos) return -1;
            memcpy(dst, APN_XERIAL_HEADER, pos);
            for (size_t start = 0; start < n; start += APN_XERIAL_BLOCK) {
                size_t block = n - start < APN_XERIAL_BLOCK ? n - start : APN_XERIAL_BLOCK;
                if (cap - pos < 4) return -1;
                size_t length = cap - pos - 4;
                if (snappy_compress((const char *)src + start, block, (char *)dst + pos + 4, &length) != SNAPPY_OK)
                    return -1;
                apn_put32(dst + pos, (uint32_t)length);
                pos += 4 + length;
            }
            *out = pos;
            return 0;
        }
#endif
#ifdef AIOPRODUCER_HAVE_LZ4
        case APN_LZ4: {
            LZ4F_preferences_t prefs;
            apn_lz4_preferences(&prefs, level);
            size_t length = LZ4F_compressFrame(dst, cap, src, n, &prefs);
            if (LZ4F_isError(length)) return -1;
            *out = length;
            return 0;
        }
#endif
#ifdef AIOPRODUCER_HAVE_ZSTD
        case APN_ZSTD: {
            if (state->zstd == NULL && (state->zstd = ZSTD_createCCtx()) == NULL) return -1;
            size_t length = ZSTD_compressCCtx(state->zstd, dst, cap, src, n, level);
            if (ZSTD_isError(length)) return -1;
            *out = length;
            return 0;
        }
#endif
        default:
            (void)state;
            (void)level;
            return -1;
    }
}

/* ---- the v2 batch header (records/layout.py) ---------------------------------------------------------------------- */

static void apn_put16(uint8_t *out, uint16_t v) {
    out[0] = (uint8_t)(v >> 8);
    out[1] = (uint8_t)v;
}

static void apn_put64(uint8_t *out, uint64_t v) {
    apn_put32(out, (uint32_t)(v >> 32));
    apn_put32(out + 4, (uint32_t)v);
}

/* The stamp and facts of one batch, and the buffers its closing reads and writes. */
typedef struct apn_job {
    const uint8_t *records; /* the uncompressed records section (the builder's buffer) */
    size_t records_len;
    uint8_t *out;           /* the encoded batch: header, then the section (compressed or not) */
    size_t out_cap;
    size_t out_len;         /* set when done */
    int codec;              /* asked for */
    int level;
    int used_codec;         /* set when done: `codec`, or APN_NONE when compressing did not shrink the section */
    int status;             /* set when done: 0, or -1 when the codec failed */
    int64_t producer_id;
    int16_t producer_epoch;
    int32_t base_sequence;
    int transactional;
    int32_t record_count;
    int64_t base_timestamp;
    int64_t max_timestamp;
    int32_t partition_leader_epoch;
    struct apn_job *next;
    void *owner;            /* the Python object that keeps every buffer above alive (borrowed here) */
} apn_job;

/* Write the 61-byte header before the section already at out + APN_HEADER_SIZE, all but its CRC. */
static void apn_write_header_fields(apn_job *job, size_t section_len, int codec) {
    uint8_t *h = job->out;
    int16_t attributes = (int16_t)(codec | (job->transactional ? APN_TRANSACTIONAL_BIT : 0));
    apn_put64(h, 0);                                                           /* base offset */
    apn_put32(h + 8, (uint32_t)(APN_HEADER_SIZE - APN_LENGTH_FIELD_END + section_len)); /* batch length */
    apn_put32(h + 12, (uint32_t)job->partition_leader_epoch);
    h[16] = APN_MAGIC;
    apn_put16(h + 21, (uint16_t)attributes);
    apn_put32(h + 23, (uint32_t)(job->record_count - 1)); /* last offset delta */
    apn_put64(h + 27, (uint64_t)job->base_timestamp);
    apn_put64(h + 35, (uint64_t)job->max_timestamp);
    apn_put64(h + 43, (uint64_t)job->producer_id);
    apn_put16(h + 51, (uint16_t)job->producer_epoch);
    apn_put32(h + 53, (uint32_t)job->base_sequence);
    apn_put32(h + 57, (uint32_t)job->record_count);
}

/* Write the 61-byte header before the section already at out + APN_HEADER_SIZE, CRC included. */
static void apn_write_header(apn_job *job, size_t section_len, int codec) {
    apn_write_header_fields(job, section_len, codec);
    apn_put32(job->out + 17, apn_crc32c(0, job->out + APN_CRC_START, APN_HEADER_SIZE - APN_CRC_START + section_len));
}

/* Close one uncompressed batch but for its CRC, which the caller computes over out + APN_CRC_START onwards and puts
 * with apn_put32 at out + 17 (on the event loop, the crc32c package's interleaved CRC is faster than this file's). */
static void apn_copy_uncompressed(apn_job *job) {
    memcpy(job->out + APN_HEADER_SIZE, job->records, job->records_len);
    apn_write_header_fields(job, job->records_len, APN_NONE);
    job->status = 0;
    job->used_codec = APN_NONE;
    job->out_len = APN_HEADER_SIZE + job->records_len;
}

/* Close one batch: compress its section after the header's room (or copy it, when that is not smaller), then
 * write the header. Needs no GIL. */
static void apn_close(apn_codec_state *state, apn_job *job) {
    uint8_t *section = job->out + APN_HEADER_SIZE;
    size_t room = job->out_cap - APN_HEADER_SIZE;
    size_t length = 0;
    int codec = job->codec;
    job->status = 0;
    if (codec != APN_NONE && job->records_len) {
        if (apn_compress(state, codec, job->level, job->records, job->records_len, section, room, &length) != 0) {
            job->status = -1;
            return;
        }
    }
    if (codec == APN_NONE || !job->records_len || length >= job->records_len) {
        /* As builder.close(): a section compression does not shrink goes out uncompressed, codec none. */
        memcpy(section, job->records, job->records_len);
        length = job->records_len;
        codec = APN_NONE;
    }
    apn_write_header(job, length, codec);
    job->used_codec = codec;
    job->out_len = APN_HEADER_SIZE + length;
}

/* ---- the worker ---------------------------------------------------------------------------------------------------- */

/* One thread closing jobs in the order they came; finished jobs wait in `done` (same order) and one byte on
 * `wake_fd` tells the event loop, once per batch of finished jobs. */
typedef struct {
    pthread_mutex_t lock;
    pthread_cond_t work;
    apn_job *todo_head, *todo_tail;
    apn_job *done_head, *done_tail;
    int wake_fd;
    int stopping;
    int started;
    pthread_t thread;
    apn_codec_state codecs;
} apn_worker;

static void *apn_worker_main(void *arg) {
    apn_worker *w = (apn_worker *)arg;
    pthread_mutex_lock(&w->lock);
    for (;;) {
        while (w->todo_head == NULL && !w->stopping) pthread_cond_wait(&w->work, &w->lock);
        apn_job *job = w->todo_head;
        if (job == NULL) break; /* stopping, and nothing left to do */
        w->todo_head = job->next;
        if (w->todo_head == NULL) w->todo_tail = NULL;
        pthread_mutex_unlock(&w->lock);
        apn_close(&w->codecs, job);
        pthread_mutex_lock(&w->lock);
        job->next = NULL;
        int was_empty = w->done_head == NULL;
        if (w->done_tail) w->done_tail->next = job;
        else w->done_head = job;
        w->done_tail = job;
        if (was_empty) {
            char byte = 1;
            ssize_t written;
            do written = write(w->wake_fd, &byte, 1);
            while (written < 0 && errno == EINTR);
        }
    }
    pthread_mutex_unlock(&w->lock);
    apn_codec_state_free(&w->codecs);
    return NULL;
}

static int apn_worker_init(apn_worker *w, int wake_fd) {
    memset(w, 0, sizeof(*w));
    w->wake_fd = wake_fd;
    if (pthread_mutex_init(&w->lock, NULL) != 0) return -1;
    if (pthread_cond_init(&w->work, NULL) != 0) {
        pthread_mutex_destroy(&w->lock);
        return -1;
    }
    return 0;
}

/* Queue a job; the thread starts with the first one. 0, or -1 when the thread could not start. */
static int apn_worker_submit(apn_worker *w, apn_job *job) {
    int result = 0;
    job->next = NULL;
    pthread_mutex_lock(&w->lock);
    if (!w->started) {
        if (pthread_create(&w->thread, NULL, apn_worker_main, w) != 0) result = -1;
        else w->started = 1;
    }
    if (result == 0) {
        if (w->todo_tail) w->todo_tail->next = job;
        else w->todo_head = job;
        w->todo_tail = job;
        pthread_cond_signal(&w->work);
    }
    pthread_mutex_unlock(&w->lock);
    return result;
}

/* The finished jobs, in order, taken off the worker (NULL: none). */
static apn_job *apn_worker_take_done(apn_worker *w) {
    pthread_mutex_lock(&w->lock);
    apn_job *jobs = w->done_head;
    w->done_head = w->done_tail = NULL;
    pthread_mutex_unlock(&w->lock);
    return jobs;
}

/* Stop the thread once it has closed every queued job, and wait for it (jobs finished meanwhile stay in `done`). */
static void apn_worker_stop(apn_worker *w) {
    pthread_mutex_lock(&w->lock);
    w->stopping = 1;
    pthread_cond_signal(&w->work);
    int started = w->started;
    w->started = 0;
    pthread_mutex_unlock(&w->lock);
    if (started) pthread_join(w->thread, NULL);
    /* Stopped: a job submitted later starts a new thread, which runs until the next stop (left set, `stopping`
     * would let that thread end as soon as its first job is done, and the next job would wait for ever). */
    pthread_mutex_lock(&w->lock);
    w->stopping = 0;
    pthread_mutex_unlock(&w->lock);
}

static void apn_worker_destroy(apn_worker *w) {
    pthread_cond_destroy(&w->work);
    pthread_mutex_destroy(&w->lock);
}

#endif
