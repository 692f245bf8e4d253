// SPDX-License-Identifier: GPL-2.0
/*
 * cspd-loop: a user-space program with known control flow, for perf mode's per-thread scenario
 * (scripts/guest/init, cspd.perf=per-thread; judged by scripts/check_perf.py --per-thread).
 *
 * main() calls run() for the first half of CSPD_LOOPS iterations, sleeps a millisecond (the
 * thread leaves its CPU: perf's per-thread event stops the trace and starts it again when the
 * thread runs on), and calls run() for the second half. Each iteration of run() calls step_a()
 * then step_b(); step_b() branches by the iteration's parity. Neither step calls anything, so
 * the trace of the loops is these calls, their returns, the parity branch and the loop's own
 * branch. Then the program says how many iterations it ran. Built statically by
 * scripts/initramfs.sh (clang-19 for aarch64 against the arm64 sysroot of scripts/guest-perf.sh)
 * to /bin/cspd-loop.
 */
#include <stdio.h>
#include <unistd.h>

#define CSPD_LOOPS 1000

/* Volatile and apart: the compiler can neither merge step_b's two stores into one nor drop them. */
static volatile unsigned long acc, odd, even;

__attribute__((noinline)) void step_a(unsigned long i)
{
	acc += i;
}

__attribute__((noinline)) void step_b(unsigned long i)
{
	if (i & 1)
		odd ^= i;
	else
		even += 3;
}

__attribute__((noinline)) void run(unsigned long from, unsigned long to)
{
	unsigned long i;

	for (i = from; i < to; i++) {
		step_a(i);
		step_b(i);
	}
}

int main(void)
{
	run(0, CSPD_LOOPS / 2);
	usleep(1000);
	run(CSPD_LOOPS / 2, CSPD_LOOPS);
	printf("cspd-loop: %d iterations of step_a and step_b, acc %lu odd %lu even %lu\n", CSPD_LOOPS, acc,
	       odd, even);
	return 0;
}
