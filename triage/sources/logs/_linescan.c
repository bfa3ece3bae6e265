/* Lines of a server-log block scanned in C: the per-line loop of the vLLM log's block path (vllm.read_bulk) without
 * a Python step or a numpy pass per line. One job: find and group lines, and parse digits at places given by Python;
 * what a line means is still read by Python, once per group, by the careful path's own code (v1scan.py).
 *
 * - scan: the block's line count, and its lines ending in "%" grouped by their text with digits zeroed (digits
 *   right after a marker such as "Engine " are kept: they name the engine);
 * - numbers: the numbers and stamps of those lines at the places Python read from each group's first line;
 * - count: a substring count (glibc memmem).
 * Input is untrusted: every read stays inside [start, end) of the buffer (numbers: inside each line); nothing is
 * written to it. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#define MAX_GROUPS 256 /* more digit patterns than this in one block: the caller reads it another way */
#define TABLE 512      /* open-addressing slots (a power of two, twice MAX_GROUPS) */
#define SCRATCH 64     /* words: lines up to 512 bytes are grouped; longer ones are left to the careful path */
#define FIELDS 7       /* numbers per stats line (v1block.FIELDS) */
#define LAYOUT (3 * FIELDS + 1)
#define STAMP 5        /* "MM-DD hh:mm:ss": month, day, hour, minute, second */

static const uint64_t HIGHS = 0x8080808080808080ULL;
static const uint64_t ZEROS = 0x3030303030303030ULL;

/* The eight bytes at p with every ASCII digit replaced by '0' (SWAR: a byte is a digit when its high nibble is 3
 * and its low nibble is at most 9). */
static inline uint64_t zeroed(const unsigned char *p) {
    uint64_t w;
    memcpy(&w, p, 8);
    uint64_t hi = (w & 0xF0F0F0F0F0F0F0F0ULL) ^ ZEROS; /* 0 where the high nibble is 3 */
    uint64_t hi_zero = ~(((hi & 0x7F7F7F7F7F7F7F7FULL) + 0x7F7F7F7F7F7F7F7FULL) | hi) & HIGHS;
    uint64_t low_big = ((w & 0x0F0F0F0F0F0F0F0FULL) + 0x0606060606060606ULL) & 0x1010101010101010ULL;
    uint64_t digit = hi_zero & ~(low_big << 3); /* 0x80 in each digit byte */
    uint64_t mask = (digit >> 7) * 0xFF;
    return (w & ~mask) | (ZEROS & mask);
}

static inline int is_digit(unsigned char c) { return c >= '0' && c <= '9'; }

static inline int is_space(unsigned char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

/* Whether a line is a Kubernetes CRI partial line: "^\S+ (stdout|stderr) P " (lines.K8S_PARTIAL). */
static int k8s_partial(const unsigned char *p, Py_ssize_t n) {
    Py_ssize_t i = 0;
    while (i < n && !is_space(p[i]))
        i++;
    if (i == 0 || i >= n || p[i] != ' ' || n - i - 1 < 9)
        return 0;
    return memcmp(p + i + 1, "stdout P ", 9) == 0 || memcmp(p + i + 1, "stderr P ", 9) == 0;
}

/* The line p[0:n] (n <= 8 * SCRATCH) with digits zeroed, as words (the last padded with zero bytes), except the
 * digits right after each occurrence of the marker. */
static void pattern_of(uint64_t *out, const unsigned char *p, Py_ssize_t n, const unsigned char *marker,
                       Py_ssize_t marker_len) {
    Py_ssize_t words = n / 8;
    for (Py_ssize_t i = 0; i < words; i++)
        out[i] = zeroed(p + 8 * i);
    if (n % 8) {
        unsigned char tail[8] = {0};
        for (Py_ssize_t i = 8 * words; i < n; i++)
            tail[i - 8 * words] = is_digit(p[i]) ? '0' : p[i];
        memcpy(&out[words], tail, 8);
    }
    if (marker_len == 0 || marker_len > n)
        return; /* (the search below would start its bound before the line) */
    /* the marker's first byte by memchr, then the rest compared: glibc's memmem sets up tables on every call,
     * which costs more than the search in a line this short */
    unsigned char *bytes = (unsigned char *)out;
    const unsigned char *at = p, *stop = p + n - marker_len;
    while (at <= stop) {
        const unsigned char *hit = memchr(at, marker[0], (size_t)(stop - at) + 1);
        if (hit == NULL)
            break;
        at = hit + 1;
        if (memcmp(hit, marker, (size_t)marker_len) != 0)
            continue;
        for (Py_ssize_t i = (hit - p) + marker_len; i < n && is_digit(p[i]); i++)
            bytes[i] = p[i];
        at = hit + marker_len;
    }
}

/* A hash of a pattern's words (a short chain of rotations: equal patterns are confirmed with memcmp anyway). */
static uint64_t words_hash(const uint64_t *w, Py_ssize_t words, Py_ssize_t n) {
    uint64_t h = (uint64_t)n * 0x9E3779B97F4A7C15ULL;
    for (Py_ssize_t i = 0; i < words; i++)
        h = ((h << 7) | (h >> 57)) ^ w[i];
    h *= 0xFF51AFD7ED558CCDULL;
    return h ^ (h >> 32);
}

typedef struct {
    uint64_t hash;
    Py_ssize_t len;
    int64_t id; /* -1: empty slot */
} slot_t;

typedef struct {
    Py_ssize_t lines, rows, cap, groups;
    int64_t *row;                 /* (line start, line end without '\r', group) per row */
    int64_t first[MAX_GROUPS];    /* per group, the row of its first line */
    uint64_t *pattern;            /* per group, its pattern's words */
    slot_t table[TABLE];
} scan_t;

enum { SCAN_OK, SCAN_REFUSED, SCAN_NO_MEMORY };

/* The group of a line's pattern (a new one when unseen), or -1 when there would be more than MAX_GROUPS. */
static int64_t group_of(scan_t *sc, const uint64_t *pattern, Py_ssize_t len) {
    Py_ssize_t words = (len + 7) / 8;
    uint64_t h = words_hash(pattern, words, len);
    size_t s = (size_t)h & (TABLE - 1);
    while (sc->table[s].id >= 0) {
        slot_t *slot = &sc->table[s];
        if (slot->hash == h && slot->len == len &&
            memcmp(sc->pattern + (size_t)slot->id * SCRATCH, pattern, (size_t)words * 8) == 0)
            return slot->id;
        s = (s + 1) & (TABLE - 1);
    }
    if (sc->groups == MAX_GROUPS)
        return -1;
    int64_t id = sc->groups++;
    memcpy(sc->pattern + (size_t)id * SCRATCH, pattern, (size_t)words * 8);
    sc->table[s] = (slot_t){h, len, id};
    sc->first[id] = sc->rows;
    return id;
}

static int scan_lines(scan_t *sc, const unsigned char *buf, Py_ssize_t start, Py_ssize_t end,
                      const unsigned char *marker, Py_ssize_t marker_len) {
    uint64_t pattern[SCRATCH];
    Py_ssize_t at = start;
    while (at < end) {
        const unsigned char *nl = memchr(buf + at, '\n', (size_t)(end - at));
        Py_ssize_t stop = nl ? (Py_ssize_t)(nl - buf) : end, line_end = stop;
        sc->lines++;
        if (k8s_partial(buf + at, line_end - at))
            return SCAN_REFUSED;
        if (line_end > at && buf[line_end - 1] == '\r')
            line_end--;
        Py_ssize_t len = line_end - at;
        if (len > 0 && len <= 8 * SCRATCH && buf[line_end - 1] == '%') {
            pattern_of(pattern, buf + at, len, marker, marker_len);
            int64_t id = group_of(sc, pattern, len);
            if (id < 0)
                return SCAN_REFUSED;
            if (sc->rows == sc->cap) {
                int64_t *more = PyMem_RawRealloc(sc->row, (size_t)sc->cap * 2 * 3 * sizeof(int64_t));
                if (more == NULL)
                    return SCAN_NO_MEMORY;
                sc->row = more;
                sc->cap *= 2;
            }
            int64_t *r = sc->row + 3 * sc->rows++;
            r[0] = at;
            r[1] = line_end;
            r[2] = id;
        }
        at = stop + 1;
    }
    return SCAN_OK;
}

PyDoc_STRVAR(scan_doc,
"scan(buf, start, end, marker) -> (lines, rows, firsts) | None\n\n"
"The whole lines of buf[start:end] (the block ends with a newline): their number, and for every line of at most 512\n"
"bytes whose last byte is '%' (a '\\r' before the newline aside) a row (line start, line end without '\\r', group) as\n"
"int64 triples in bytes. A group holds the lines equal to its first line once digits are zeroed, except digits right\n"
"after ``marker``; ``firsts`` (int64 in bytes) holds the row of each group's first line. None when a line is a\n"
"Kubernetes partial line (\"stdout P\") or the lines take more than 256 patterns.");

static PyObject *scan(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer view, marker;
    Py_ssize_t start, end;
    if (!PyArg_ParseTuple(args, "y*nny*", &view, &start, &end, &marker))
        return NULL;
    PyObject *result = NULL;
    scan_t *sc = NULL;
    if (start < 0 || end > view.len || start > end) {
        PyErr_SetString(PyExc_ValueError, "start and end must lie inside the buffer");
        goto done;
    }
    sc = PyMem_RawCalloc(1, sizeof(scan_t));
    if (sc != NULL) {
        sc->cap = 4096;
        sc->row = PyMem_RawMalloc((size_t)sc->cap * 3 * sizeof(int64_t));
        sc->pattern = PyMem_RawMalloc((size_t)MAX_GROUPS * SCRATCH * sizeof(uint64_t));
    }
    if (sc == NULL || sc->row == NULL || sc->pattern == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (int i = 0; i < TABLE; i++)
        sc->table[i].id = -1;
    int status;
    Py_BEGIN_ALLOW_THREADS
    status = scan_lines(sc, view.buf, start, end, marker.buf, marker.len);
    Py_END_ALLOW_THREADS
    if (status == SCAN_NO_MEMORY)
        PyErr_NoMemory();
    else if (status == SCAN_REFUSED)
        result = Py_NewRef(Py_None);
    else
        result = Py_BuildValue("(ny#y#)", sc->lines, (const char *)sc->row, sc->rows * 3 * (Py_ssize_t)sizeof(int64_t),
                               (const char *)sc->first, sc->groups * (Py_ssize_t)sizeof(int64_t));
done:
    if (sc != NULL) {
        PyMem_RawFree(sc->row);
        PyMem_RawFree(sc->pattern);
        PyMem_RawFree(sc);
    }
    PyBuffer_Release(&view);
    PyBuffer_Release(&marker);
    return result;
}

/* The number whose text is p[0:width] (digits, with a dot as the second last character when dot): as float()
 * reads "%d" and "%.1f" text; NaN when the text is not that (never for lines of a checked pattern). */
static double number(const unsigned char *p, int64_t width, int64_t dot) {
    int64_t value = 0;
    for (int64_t i = 0; i < width; i++) {
        if (dot && i == width - 2) {
            if (p[i] != '.')
                return NAN;
            continue;
        }
        if (!is_digit(p[i]))
            return NAN;
        value = value * 10 + (p[i] - '0');
    }
    return dot ? (double)value / 10.0 : (double)value;
}

/* The numbers and stamps of n lines (see numbers_doc) into v and t; 0 when a place lies outside its line. */
static int read_numbers(const unsigned char *buf, Py_ssize_t size, const int64_t *s, const int64_t *e,
                        const int64_t *f, Py_ssize_t n, const int64_t *lay, Py_ssize_t groups, double *v, int64_t *t) {
    static const int stamp_at[STAMP] = {0, 3, 6, 9, 12}; /* "MM-DD hh:mm:ss" */
    for (Py_ssize_t i = 0; i < n; i++) {
        if (f[i] < 0 || f[i] >= groups || s[i] < 0 || e[i] > size || s[i] > e[i])
            return 0;
        const int64_t *l = lay + f[i] * LAYOUT, len = e[i] - s[i];
        const unsigned char *line = buf + s[i];
        for (int k = 0; k < FIELDS; k++) {
            int64_t stop = l[k], width = l[FIELDS + k];
            if (width == 0) {
                v[i * FIELDS + k] = NAN;
                continue;
            }
            if (width < 0 || width > 18 || stop > len || stop - width < 0)
                return 0;
            v[i * FIELDS + k] = number(line + stop - width, width, l[2 * FIELDS + k]);
        }
        int64_t at = l[3 * FIELDS];
        if (at < 0 || at + 14 > len)
            return 0;
        for (int k = 0; k < STAMP; k++)
            t[i * STAMP + k] = (line[at + stamp_at[k]] - '0') * 10 + (line[at + stamp_at[k] + 1] - '0');
    }
    return 1;
}

PyDoc_STRVAR(numbers_doc,
"numbers(buf, starts, ends, forms, layouts) -> (values, stamps)\n\n"
"For each line buf[starts[i]:ends[i]] (int64 in bytes) read by the layout layouts[forms[i]] (int64 rows of\n"
"v1block.number_layout, offsets from the line's start): its 7 numbers as float64 (NaN where the width is 0) and\n"
"its stamp's month, day, hour, minute and second as int64, both row after row in bytes. A place outside its line\n"
"is a ValueError.");

static PyObject *numbers(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer view, starts, ends, forms, layouts;
    if (!PyArg_ParseTuple(args, "y*y*y*y*y*", &view, &starts, &ends, &forms, &layouts))
        return NULL;
    PyObject *result = NULL, *values = NULL, *stamps = NULL;
    Py_ssize_t n = starts.len / (Py_ssize_t)sizeof(int64_t), groups = layouts.len / (LAYOUT * sizeof(int64_t));
    if (ends.len != starts.len || forms.len != starts.len || layouts.len % (LAYOUT * sizeof(int64_t))) {
        PyErr_SetString(PyExc_ValueError, "starts, ends and forms must be as long, layouts whole rows");
        goto done;
    }
    values = PyBytes_FromStringAndSize(NULL, n * FIELDS * (Py_ssize_t)sizeof(double));
    stamps = PyBytes_FromStringAndSize(NULL, n * STAMP * (Py_ssize_t)sizeof(int64_t));
    if (values == NULL || stamps == NULL)
        goto done;
    int fine;
    Py_BEGIN_ALLOW_THREADS /* the two outputs are this call's own until it returns */
    fine = read_numbers(view.buf, view.len, starts.buf, ends.buf, forms.buf, n, layouts.buf, groups,
                        (double *)PyBytes_AS_STRING(values), (int64_t *)PyBytes_AS_STRING(stamps));
    Py_END_ALLOW_THREADS
    if (!fine)
        goto outside;
    result = Py_BuildValue("(OO)", values, stamps);
    goto done;
outside:
    PyErr_SetString(PyExc_ValueError, "a layout reads outside its line");
done:
    Py_XDECREF(values);
    Py_XDECREF(stamps);
    PyBuffer_Release(&view);
    PyBuffer_Release(&starts);
    PyBuffer_Release(&ends);
    PyBuffer_Release(&forms);
    PyBuffer_Release(&layouts);
    return result;
}

typedef signed char bytes16 __attribute__((vector_size(16)));

/* Occurrences of needle (m bytes) in p[0:n], not overlapping. Sixteen places at a time compare the needle's first
 * and last bytes (GCC's portable vector extensions: SSE2 on x86-64, NEON on arm64), and only where both match is
 * the rest compared: a log's text seldom holds both at the needle's distance. glibc's memmem, whose shift table is
 * what a log this size pays for, reads the rest. */
static Py_ssize_t count_needle(const unsigned char *p, Py_ssize_t n, const unsigned char *needle, Py_ssize_t m) {
    Py_ssize_t found = 0, i = 0;
    if (m >= 2) {
        bytes16 first, last;
        memset(&first, needle[0], 16);
        memset(&last, needle[m - 1], 16);
        while (i + m - 1 + 16 <= n) {
            bytes16 a, b, both;
            memcpy(&a, p + i, 16);
            memcpy(&b, p + i + m - 1, 16);
            both = (a == first) & (b == last);
            uint64_t half[2];
            memcpy(half, &both, 16);
            if (!(half[0] | half[1])) {
                i += 16;
                continue;
            }
            Py_ssize_t next = i + 16;
            for (int k = 0; k < 16; k++) {
                if (((const signed char *)&both)[k] && memcmp(p + i + k, needle, (size_t)m) == 0) {
                    found++;
                    next = i + k + m; /* the next occurrence starts after this one */
                    break;
                }
            }
            i = next;
        }
    }
    while (i < n) {
        const unsigned char *hit = memmem(p + i, (size_t)(n - i), needle, (size_t)m);
        if (hit == NULL)
            break;
        found++;
        i = (hit - p) + m;
    }
    return found;
}

PyDoc_STRVAR(count_doc, "count(buf, start, end, needle) -> int\n\n"
                        "Occurrences of needle in buf[start:end], not overlapping (as bytes.count).");

static PyObject *count(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer view, needle;
    Py_ssize_t start, end, found = 0;
    if (!PyArg_ParseTuple(args, "y*nny*", &view, &start, &end, &needle))
        return NULL;
    PyObject *result = NULL;
    if (start < 0 || end > view.len || start > end || needle.len == 0) {
        PyErr_SetString(PyExc_ValueError, "start and end must lie inside the buffer, the needle must not be empty");
        goto done;
    }
    Py_BEGIN_ALLOW_THREADS
    found = count_needle((const unsigned char *)view.buf + start, end - start, needle.buf, needle.len);
    Py_END_ALLOW_THREADS
    result = PyLong_FromSsize_t(found);
done:
    PyBuffer_Release(&view);
    PyBuffer_Release(&needle);
    return result;
}

static PyMethodDef methods[] = {
    {"scan", scan, METH_VARARGS, scan_doc},
    {"numbers", numbers, METH_VARARGS, numbers_doc},
    {"count", count, METH_VARARGS, count_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    .m_base = PyModuleDef_HEAD_INIT,
    .m_name = "_linescan",
    .m_doc = "Lines of a server-log block scanned in C (see the file's comment).",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC PyInit__linescan(void) { return PyModule_Create(&module); }
