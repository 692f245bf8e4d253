/* SPDX-License-Identifier: GPL-2.0 */
/*
 * CoreSight panic dump: drivers register callbacks that copy device state into a reserved
 * memory region when the kernel panics.
 *
 * Each registration gets a fixed slot of @max_bytes in the region when it is added, so nothing
 * is allocated at panic time. At panic the core calls the callbacks in phases (trace
 * sources, then CPU debug samples, then trace sinks, then the rest), each phase in registration
 * order, on the panicking CPU with the other CPUs stopped. A callback must not sleep, allocate,
 * take a lock another CPU may hold, or wait without a bound. It writes at most @size bytes at
 * @buf, stores how many it wrote in *@len, and returns 0 or a negative errno; an error costs only
 * its own record, which says so.
 */
#ifndef _LINUX_CORESIGHT_PANIC_DUMP_H
#define _LINUX_CORESIGHT_PANIC_DUMP_H

#include <linux/err.h>
#include <linux/types.h>

/* What a registration dumps; decides its phase at panic time. */
enum coresight_dump_type {
	CORESIGHT_DUMP_CPU_DEBUG = 1,	/* phase 2: sample CPUs */
	CORESIGHT_DUMP_SOURCE = 2,	/* phase 1: stop trace sources */
	CORESIGHT_DUMP_SINK = 3,	/* phase 3: stop and drain trace sinks */
	CORESIGHT_DUMP_OTHER = 4,	/* phase 4: anything else */
};

/*
 * What layout a registration's data has, recorded with it so that a reader decodes each record
 * as what it is. A client whose data is its own leaves it at CORESIGHT_DUMP_PAYLOAD_OPAQUE.
 */
enum coresight_dump_payload {
	CORESIGHT_DUMP_PAYLOAD_OPAQUE = 0,	/* bytes only the client knows */
	CORESIGHT_DUMP_PAYLOAD_TMC = 1,		/* a TMC ETB/ETF drain */
	CORESIGHT_DUMP_PAYLOAD_ETM4X = 2,	/* an ETMv4's saved registers */
	CORESIGHT_DUMP_PAYLOAD_CPU_DEBUG = 3,	/* a CPU debug PC sample */
	CORESIGHT_DUMP_PAYLOAD_ETR = 4,		/* a TMC-ETR's registers and buffer */
};

/* No CPU: the registration is not tied to one. */
#define CORESIGHT_DUMP_NO_CPU (-1)

/* Most crash-path entry addresses coresight_dump_stop_addrs() gives. */
#define CORESIGHT_DUMP_MAX_STOP_ADDRS 16

typedef int (*coresight_dump_fn)(void *data, void *buf, size_t size, size_t *len);

struct coresight_dump_desc {
	const char *name;		/* device name, copied; up to 31 bytes are kept */
	enum coresight_dump_type type;
	int cpu;			/* CPU number or CORESIGHT_DUMP_NO_CPU */
	size_t max_bytes;		/* slot size reserved in the region */
	enum coresight_dump_payload payload;	/* layout of the data (0: opaque) */
	coresight_dump_fn dump;
	void *data;			/* passed to @dump and @metadata */
	coresight_dump_fn metadata;	/* optional: what decodes the data, see below */
};

/* A registration, opaque: what coresight_dump_add() returns and coresight_dump_del() takes. */
struct coresight_dump_entry;

/*
 * coresight_dump_add() copies the description (the name included): @desc may go once it
 * returns; @dump and @data must stay valid until coresight_dump_del(). It returns the
 * registration or an ERR_PTR: -EINVAL for a bad description, -ENOSPC when the region has no
 * room (or the core no free registration), -ENODEV without the core or a region.
 *
 * coresight_dump_del() returns once no panic path can run @dump any more, so the caller may
 * free what it uses; while a panic is being dumped (its CPU may be inside @dump) it never
 * returns. It sleeps (a mutex): process context only.
 *
 * coresight_dump_metadata_changed() records, while the kernel runs, what a reader needs to
 * decode each registration's data (a trace source's configuration): it calls every @metadata
 * into its registration's slot and commits the region, so that a dump is decodable when no
 * panic-time step runs (kdump without crash_kexec_post_notifiers). A trace source driver calls
 * it when it starts tracing with a configuration it has not recorded yet. It may be called in
 * any context; @metadata runs with interrupts off, must not sleep, and returns -ENODATA when it
 * has nothing to record (the slot is left as it is). It returns -EBUSY while a panic is being
 * dumped, -ENODEV without the core or a region.
 *
 * coresight_dump_stop_addrs() copies up to @max of the crash path's entry addresses (the core's
 * stop_at parameter) to @addrs and returns how many: a trace source driver programs them as
 * stop points when it starts tracing, so that its trace ends where the crash began.
 */
#if IS_ENABLED(CONFIG_CORESIGHT_PANIC_DUMP)
struct coresight_dump_entry *coresight_dump_add(const struct coresight_dump_desc *desc);
void coresight_dump_del(struct coresight_dump_entry *entry);
int coresight_dump_metadata_changed(void);
int coresight_dump_stop_addrs(unsigned long *addrs, unsigned int max);
#else
static inline struct coresight_dump_entry *
coresight_dump_add(const struct coresight_dump_desc *desc)
{
	return ERR_PTR(-ENODEV);
}

static inline void coresight_dump_del(struct coresight_dump_entry *entry) { }

static inline int coresight_dump_metadata_changed(void)
{
	return -ENODEV;
}

static inline int coresight_dump_stop_addrs(unsigned long *addrs, unsigned int max)
{
	return 0;
}
#endif

#endif /* _LINUX_CORESIGHT_PANIC_DUMP_H */
