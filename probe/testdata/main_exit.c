/* A process whose main thread leaves first: it waits as a zombie while
 * the other thread sleeps for the milliseconds given, then the process
 * ends with that thread. For the tests of when a process has ended. */
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

static void *sleeper(void *arg)
{
	usleep((useconds_t)atoi(arg) * 1000);
	return NULL;
}

int main(int argc, char **argv)
{
	pthread_t th;

	if (argc < 2 || pthread_create(&th, NULL, sleeper, argv[1]))
		return 2;
	pthread_exit(NULL);
}
