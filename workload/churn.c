/* Threads that come and go beside the traffic (--thread-churn): a process
 * as a tracer attaching to it by pid meets it, whose tids start and exit
 * while its probes are placed and its memory scanned. */
#include <pthread.h>
#include <stdlib.h>
#include <time.h>
#include "loop.h"

struct wl_churn {
	pthread_t thread;
	volatile int stop;
};

static void *short_life(void *arg)
{
	struct timespec ts = { 0, 200 * 1000 }; /* 0.2 ms */

	nanosleep(&ts, 0);
	return arg;
}

static void *churn(void *arg)
{
	struct wl_churn *c = arg;

	while (!__atomic_load_n(&c->stop, __ATOMIC_ACQUIRE)) {
		pthread_t t[4];
		int n = 0;

		for (int i = 0; i < 4; i++)
			if (!pthread_create(&t[n], 0, short_life, 0))
				n++;
		for (int i = 0; i < n; i++)
			pthread_join(t[i], 0);
	}
	return 0;
}

struct wl_churn *wl_churn_start(void)
{
	struct wl_churn *c = calloc(1, sizeof(*c));

	if (!c)
		return 0;
	if (pthread_create(&c->thread, 0, churn, c)) {
		free(c);
		return 0;
	}
	return c;
}

void wl_churn_stop(struct wl_churn *c)
{
	if (!c)
		return;
	__atomic_store_n(&c->stop, 1, __ATOMIC_RELEASE);
	pthread_join(c->thread, 0);
	free(c);
}
