"""The C a loop kernel runs on: what every kernel's source starts with.

In: nothing. Out: `PRELUDE`, C text: the array descriptor (`npd_arr`) and value slot
(`npd_val`) the Python side fills, the undo log of element stores, the scratch buffer of array
statements, Python's floor division, modulo and integer power, CPython's float divmod, the
C library's ``pow`` behind a pointer, ``npd_keep`` (a float result the compiler may neither
drop nor fold), the IEEE-flag test, NumPy's BLAS ``ddot`` (set after loading), and the SIGINT
handler that goes in front of Python's while a kernel runs. Used by `c_loop_nest`, which
appends one kernel function to it.
"""

from __future__ import annotations

__all__ = ["PRELUDE"]

PRELUDE = r"""
#include <math.h>
#include <fenv.h>
#include <limits.h>
#include <string.h>
#include <stdlib.h>
#include <signal.h>

/* an array: an input's `id` (its place in the call's arrays), or row `row - 1` of one (a
   ``for row in A`` loop's row, row >= 1; 0: the whole array) */
typedef struct { char *data; long long shape[4]; long long strides[4]; int id; int writeable;
                 long long row; } npd_arr;
typedef union { long long i; double f; } npd_val;
typedef struct { char *addr; long long old; } npd_undo;
/* a block of n elements at addr, stride apart, whose old values are arena[at:at+n], logged
   when the log held pos single entries (a fast copy's stores: loop_nest.fast) */
typedef struct { char *addr; long long stride, n, at, pos; } npd_block;
typedef struct { npd_undo *items; long long n, cap; npd_block *blocks; long long nb, capb;
                 long long *arena; long long na, capa; } npd_log;

/* row i of array a (loop_nest.items: ``for row in A``) */
static inline npd_arr npd_row(npd_arr a, long long i) {
    npd_arr r;
    r.data = a.data + i * a.strides[0];
    for (int k = 0; k < 3; k++) {
        r.shape[k] = a.shape[k + 1];
        r.strides[k] = a.strides[k + 1];
    }
    r.shape[3] = r.strides[3] = 0;
    r.id = a.id;
    r.writeable = a.writeable;
    r.row = i + 1;
    return r;
}

static int npd_log_grow(npd_log *log) {
    long long cap = log->cap ? 2 * log->cap : 256;
    npd_undo *items = (npd_undo *)realloc(log->items, (size_t)cap * sizeof(npd_undo));
    if (!items) return 1;
    log->items = items;
    log->cap = cap;
    return 0;
}

static int npd_log_block(npd_log *log, char *addr, long long stride, long long n) {
    /* (a block a recent one of this save window covers is not logged again: a deoptimisation
       puts back the oldest value of each element, which the earlier block holds) */
    for (long long b = log->nb - 1; b >= 0 && b >= log->nb - 8; b--)
        if (log->blocks[b].addr == addr && log->blocks[b].stride == stride && log->blocks[b].n >= n)
            return 0;
    if (log->nb == log->capb) {
        long long cap = log->capb ? 2 * log->capb : 16;
        npd_block *blocks = (npd_block *)realloc(log->blocks, (size_t)cap * sizeof(npd_block));
        if (!blocks) return 1;
        log->blocks = blocks;
        log->capb = cap;
    }
    if (log->capa - log->na < n) {
        long long cap = 2 * log->capa > log->na + n ? 2 * log->capa : log->na + n + 1024;
        long long *arena = (long long *)realloc(log->arena, (size_t)cap * 8);
        if (!arena) return 1;
        log->arena = arena;
        log->capa = cap;
    }
    npd_block *b = &log->blocks[log->nb++];
    b->addr = addr; b->stride = stride; b->n = n; b->at = log->na; b->pos = log->n;
    if (stride == 8)
        memcpy(log->arena + log->na, addr, (size_t)n * 8);
    else
        for (long long k = 0; k < n; k++) memcpy(log->arena + log->na + k, addr + k * stride, 8);
    log->na += n;
    return 0;
}
#define NPD_LOG_CLEAR(log) ((log).n = (log).nb = (log).na = 0)
/* a save point is forced past 4096 single entries (each undone one by one), or past 4M logged
   block elements (32 MB): blocks repeat from one iteration of the outermost loop to the next
   (a time loop's stencil logs the same rows each step), and within a save window a repeated
   block is not logged again */
#define NPD_LOG_FULL(log) ((log).n > 4096 || (log).na > (1LL << 22))

static void npd_log_free(npd_log *log) {
    free(log->items);
    free(log->blocks);
    free(log->arena);
}

/* a fast copy's test (loop_nest.fast): a + c .. b + c within [lo, hi], without overflow */
static inline int npd_span(long long a, long long b, long long c, long long lo, long long hi) {
    long long x, y;
    if (__builtin_add_overflow(a, c, &x) || __builtin_add_overflow(b, c, &y)) return 0;
    return x >= lo && y <= hi;
}

/* put back everything logged, newest first (single entries and blocks interleaved) */
static void npd_undo_all(npd_log *log) {
    long long e = log->n;
    for (long long b = log->nb - 1; b >= -1; b--) {
        long long stop = b >= 0 ? log->blocks[b].pos : 0;
        for (; e > stop; e--)
            memcpy(log->items[e - 1].addr, &log->items[e - 1].old, 8);
        if (b >= 0) {
            npd_block *k = &log->blocks[b];
            for (long long j = k->n - 1; j >= 0; j--)
                memcpy(k->addr + j * k->stride, log->arena + k->at + j, 8);
        }
    }
    NPD_LOG_CLEAR(*log);
}
/* the C library's pow, called (never folded or turned into x*x by the compiler: the bits are
   those of the pow CPython and NumPy call) */
static double (* volatile npd_pow)(double, double) = pow;

/* Python's int // and % (floor), False: a plain result; True: deoptimise */
static inline int npd_floordiv_i64(long long a, long long b, long long *r) {
    if (b == 0 || (a == LLONG_MIN && b == -1)) return 1;
    long long q = a / b;
    if ((a % b != 0) && ((a < 0) != (b < 0))) q -= 1;
    *r = q;
    return 0;
}
static inline int npd_mod_i64(long long a, long long b, long long *r) {
    if (b == 0) return 1;
    if (b == -1) { *r = 0; return 0; }
    long long m = a % b;
    if (m != 0 && ((m < 0) != (b < 0))) m += b;
    *r = m;
    return 0;
}
static inline int npd_pow_i64(long long a, long long b, long long *r) {
    if (b < 0) return 1;
    long long res = 1;
    while (b) {
        if ((b & 1) && __builtin_mul_overflow(res, a, &res)) return 1;
        b >>= 1;
        if (b && __builtin_mul_overflow(a, a, &a)) return 1;
    }
    *r = res;
    return 0;
}
/* CPython's float divmod (floatobject.c _float_div_mod); NumPy's npy_divmod is the same */
static inline double npd_divmod_f64(double vx, double wx, double *modp) {
    double div, mod = fmod(vx, wx), floordiv;
    div = (vx - mod) / wx;
    if (mod) {
        if ((wx < 0) != (mod < 0)) { mod += wx; div -= 1.0; }
    } else {
        mod = copysign(0.0, wx);
    }
    if (div) {
        floordiv = floor(div);
        if (div - floordiv > 0.5) floordiv += 1.0;
    } else {
        floordiv = copysign(0.0, vx / wx);
    }
    *modp = mod;
    return floordiv;
}
static inline double npd_floordiv_f64(double a, double b) {
    double m;
    return npd_divmod_f64(a, b, &m);
}
static inline double npd_mod_f64(double a, double b) {
    double m;
    npd_divmod_f64(a, b, &m);
    return m;
}

/* Ctrl-C: a handler in front of Python's while a kernel runs in the main thread */
static volatile sig_atomic_t npd_interrupted;
static struct sigaction npd_previous;
static void npd_on_sigint(int sig, siginfo_t *info, void *context) {
    if (npd_previous.sa_flags & SA_SIGINFO) {
        npd_interrupted = 1;
        npd_previous.sa_sigaction(sig, info, context);
    } else if (npd_previous.sa_handler == SIG_DFL) {
        sigaction(SIGINT, &npd_previous, NULL);
        raise(SIGINT);
    } else if (npd_previous.sa_handler != SIG_IGN) {
        npd_interrupted = 1;
        npd_previous.sa_handler(sig);
    }
}
static void npd_catch_sigint(void) {
    struct sigaction mine;
    memset(&mine, 0, sizeof mine);
    mine.sa_sigaction = npd_on_sigint;
    mine.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&mine.sa_mask);
    npd_interrupted = 0;
    sigaction(SIGINT, &mine, &npd_previous);
}
static void npd_release_sigint(void) {
    sigaction(SIGINT, &npd_previous, NULL);
}

/* the array statements' right sides (elementwise) */
typedef struct { double *data; long long cap; } npd_scratch;
static int npd_scratch_reserve(npd_scratch *s, long long n) {
    if (n <= s->cap) return 0;
    double *data = (double *)realloc(s->data, (size_t)(n > 0 ? n : 1) * sizeof(double));
    if (!data) return 1;
    s->data = data;
    s->cap = n;
    return 0;
}
/* The buffers of a call, kept for the next one (npd_take, npd_give): a block log of a long
   chunk is malloc'd with mmap, whose fresh pages fault in on every call otherwise (a stencil
   over 20,000 elements spent more time in page faults than computing). One set per library,
   in one slot: a call takes it (or makes an empty set when another call holds it: calls in
   several threads share nothing) and puts it back if the slot is empty, each buffer only up
   to NPD_KEEP_BYTES (what a big call needs beyond that is freed: its pages' faults cost
   little next to its work). The slot's set is freed when the library is unloaded (no call
   runs then: the library goes when its last kernel does), so nothing outlives it, whichever
   threads ran it. */
#define NPD_KEEP_BYTES (8LL << 20)
typedef struct { npd_log log; npd_scratch scratch; double *ub[4]; } npd_kept;
static npd_kept *npd_kept_slot;
static npd_kept npd_no_kept;  /* (all empty: the set of a call whose calloc failed) */
static npd_kept *npd_take(void) {
    npd_kept *k = __atomic_exchange_n(&npd_kept_slot, NULL, __ATOMIC_ACQ_REL);
    return k ? k : (npd_kept *)calloc(1, sizeof(npd_kept));
}
static void npd_kept_free(npd_kept *k) {
    npd_log_free(&k->log);
    free(k->scratch.data);
    for (int j = 0; j < 4; j++)
        free(k->ub[j]);
    free(k);
}
static void npd_give(npd_kept *k) {
    npd_log *log = &k->log;
    if (log->cap * (long long)sizeof(npd_undo) + log->capb * (long long)sizeof(npd_block)
            + log->capa * 8 > NPD_KEEP_BYTES) {
        npd_log_free(log);
        memset(log, 0, sizeof *log);
    }
    if (k->scratch.cap * 8 > NPD_KEEP_BYTES) {
        free(k->scratch.data);
        k->scratch.data = NULL;
        k->scratch.cap = 0;
    }
    npd_kept *none = NULL;
    if (!__atomic_compare_exchange_n(&npd_kept_slot, &none, k, 0, __ATOMIC_ACQ_REL,
                                     __ATOMIC_ACQUIRE))
        npd_kept_free(k);
}
__attribute__((destructor)) static void npd_kept_unload(void) {
    if (npd_kept_slot)
        npd_kept_free(npd_kept_slot);
    npd_kept_slot = NULL;
}

/* NumPy's own inner loops (set once the library is loaded: npd_set_ufunc): ufuncs' float64
   loops, called on one element as NumPy calls them for a scalar, and reductions' loops */
typedef void (*npd_uloop)(char **, const long long *, const long long *, void *);
static npd_uloop npd_ufn[16];
static void *npd_udata[16];
void npd_set_ufunc(int k, void *fn, void *data) {
    npd_ufn[k] = (npd_uloop)fn;
    npd_udata[k] = data;
}
static inline double npd_ufunc1(int k, double x) {
    double r;
    char *args[2] = {(char *)&x, (char *)&r};
    long long n = 1, steps[2] = {8, 8};
    /* (some of NumPy's loops clear the IEEE flags before they set the ones their result
       calls for: the flags of the kernel's earlier operations are raised again after it) */
    int before = fetestexcept(FE_INVALID | FE_OVERFLOW | FE_DIVBYZERO);
    npd_ufn[k](args, &n, steps, npd_udata[k]);
    if (before)
        feraiseexcept(before);
    return r;
}

/* a two-argument ufunc's float64 loop on one pair (npd_ufunc1's way) */
static inline double npd_ufunc2(int k, double x, double y) {
    double r;
    char *args[3] = {(char *)&x, (char *)&y, (char *)&r};
    long long n = 1, steps[3] = {8, 8, 8};
    int before = fetestexcept(FE_INVALID | FE_OVERFLOW | FE_DIVBYZERO);
    npd_ufn[k](args, &n, steps, npd_udata[k]);
    if (before)
        feraiseexcept(before);
    return r;
}

/* the same on n elements, in place (a fast copy's batch: loop_nest.batches) */
static inline void npd_ufuncn(int k, double *x, long long n) {
    char *args[2] = {(char *)x, (char *)x};
    long long steps[2] = {8, 8};
    int before = fetestexcept(FE_INVALID | FE_OVERFLOW | FE_DIVBYZERO);
    npd_ufn[k](args, &n, steps, npd_udata[k]);
    if (before)
        feraiseexcept(before);
}

/* a reduction of a 1-d view (loop_nest.reductions) by NumPy's own loop of the ufunc, called
   as NumPy's reduce calls it: *out is the start, the n elements from p are folded into it in
   one call (numpy_loops.reduce_loop checked on probes that this is NumPy's result) */
static inline void npd_reduce(int k, const char *p, long long n, long long stride, void *out) {
    char *args[3] = {(char *)out, (char *)p, (char *)out};
    long long steps[3] = {0, stride, 0};
    int before = fetestexcept(FE_INVALID | FE_OVERFLOW | FE_DIVBYZERO);
    if (n > 0)
        npd_ufn[k](args, &n, steps, npd_udata[k]);
    if (before)
        feraiseexcept(before);
}
/* x.sum() starts at 0; x.max() and x.min() at the first element (n >= 1: checked before) */
static inline double npd_sum_f64(int k, const char *p, long long n, long long s) {
    double r = 0.0;
    npd_reduce(k, p, n, s, &r);
    return r;
}
static inline long long npd_sum_i64(int k, const char *p, long long n, long long s) {
    long long r = 0;
    npd_reduce(k, p, n, s, &r);
    return r;
}
static inline double npd_fold_f64(int k, const char *p, long long n, long long s) {
    double r = *(const double *)p;
    npd_reduce(k, p + s, n - 1, s, &r);
    return r;
}
static inline long long npd_fold_i64(int k, const char *p, long long n, long long s) {
    long long r = *(const long long *)p;
    npd_reduce(k, p + s, n - 1, s, &r);
    return r;
}

/* NumPy's BLAS ddot (set once the library is loaded: npd_set_ddot) */
static double (*npd_ddot)(long long, const double *, long long, const double *, long long);
void npd_set_ddot(void *f) { npd_ddot = (double (*)(long long, const double *, long long,
                                                     const double *, long long))f; }

/* Every float result goes through this: computed at run time, where the program computes it,
   never dropped when unused nor folded when constant (its IEEE flags are the checks) */
static inline double npd_keep(double x) {
#if defined(__x86_64__) || defined(__i386__)
    __asm__ volatile("" : "+x"(x));
#elif defined(__aarch64__)
    __asm__ volatile("" : "+w"(x));
#else
    __asm__ volatile("" : "+m"(x));
#endif
    return x;
}
/* The IEEE flags around a kernel: saved and cleared on entry (npd_fp_enter), tested at save
   points and ways out (NPD_FP_BAD: the flags NumPy warns on and Python raises on: invalid,
   overflow, divide-by-zero), put back on the way out (npd_fp_leave). On x86-64 through MXCSR
   (SSE, which all double arithmetic uses) and the x87 status word, read directly: a few
   cycles, where glibc's feclearexcept and fesetexceptflag store and load the whole x87
   environment (~50 ns each); x87 flags that are set (long double code) take glibc's way. */
#if defined(__x86_64__)
typedef struct { unsigned sse; unsigned short x87; fexcept_t all; } npd_fpsave;
static inline unsigned npd_mxcsr(void) {
    unsigned csr;
    __asm__ volatile("stmxcsr %0" : "=m"(csr) : : "memory");
    return csr;
}
static inline void npd_set_mxcsr(unsigned csr) {
    __asm__ volatile("ldmxcsr %0" : : "m"(csr) : "memory");
}
static inline unsigned short npd_x87_flags(void) {
    unsigned short sw;
    __asm__ volatile("fnstsw %0" : "=am"(sw) : : "memory");
    return sw & FE_ALL_EXCEPT;
}
static inline void npd_fp_enter(npd_fpsave *s) {
    unsigned csr = npd_mxcsr();
    s->sse = csr & FE_ALL_EXCEPT;
    s->x87 = npd_x87_flags();
    if (s->x87) {
        fegetexceptflag(&s->all, FE_ALL_EXCEPT);
        feclearexcept(FE_ALL_EXCEPT);
    } else {
        npd_set_mxcsr(csr & ~(unsigned)FE_ALL_EXCEPT);
    }
}
static inline void npd_fp_leave(npd_fpsave *s) {
    if (s->x87) {
        fesetexceptflag(&s->all, FE_ALL_EXCEPT);
        return;
    }
    if (npd_x87_flags())  /* (they were clear on entry) */
        __asm__ volatile("fnclex" : : : "memory");
    npd_set_mxcsr((npd_mxcsr() & ~(unsigned)FE_ALL_EXCEPT) | s->sse);
}
#define NPD_FP_BAD() (((npd_mxcsr() | npd_x87_flags()) \
                       & (FE_INVALID | FE_OVERFLOW | FE_DIVBYZERO)) != 0)
#else
typedef struct { fexcept_t all; } npd_fpsave;
static inline void npd_fp_enter(npd_fpsave *s) {
    fegetexceptflag(&s->all, FE_ALL_EXCEPT);
    feclearexcept(FE_ALL_EXCEPT);
}
static inline void npd_fp_leave(npd_fpsave *s) { fesetexceptflag(&s->all, FE_ALL_EXCEPT); }
#define NPD_FP_BAD() fetestexcept(FE_INVALID | FE_OVERFLOW | FE_DIVBYZERO)
#endif

#define NPD_STORE(T, arr, off, value) do { \
    char *p_ = (arr).data + (off); \
    if (!(arr).writeable) goto npd_deopt; \
    if (undo.n == undo.cap && npd_log_grow(&undo)) goto npd_deopt; \
    undo.items[undo.n].addr = p_; memcpy(&undo.items[undo.n].old, p_, 8); undo.n++; \
    *(T *)p_ = (value); } while (0)
"""
