/*
 * mpi.h - what `gmsim sweep` asks of MPI, as a table of calls in a module
 * of its own (cli/mpi/gmsim_mpi.c, built as gmsim-mpi.so where CMake finds
 * MPI), which cmd_sweep.c loads only when a sweep runs under mpirun, srun
 * or --mpi: every other command, and the trace reader's child process,
 * start without Open MPI's seven libraries (about 1 ms a process:
 * bench/README, "Start-up").
 */
#ifndef GM_CLI_MPI_H
#define GM_CLI_MPI_H

#include <stddef.h>

#define GM_MPI_ABI 1
#define GM_MPI_MODULE "gmsim-mpi.so" /* next to gmsim, or in ../lib/gmsim */
#define GM_MPI_ENTRY "gm_mpi_module" /* const gm_mpi_ops *(void) */

typedef struct gm_mpi_ops {
    int abi; /* GM_MPI_ABI */
    /* MPI_Init, then this rank and the world's size */
    void (*init)(int *rank, int *size);
    /* the ranks on this node (MPI_COMM_TYPE_SHARED), this one included */
    int (*node_ranks)(void);
    /* every rank's `bytes` bytes at `mine` to rank 0, in rank order: there
     * *all (malloc'd; NULL elsewhere) holds *total bytes. Collective: every
     * rank calls it, also one whose `ok` is 0 (it then sends nothing).
     * Memory short on rank 0 ends the job (MPI_Abort), saying so. */
    void (*gather)(const void *mine, int bytes, int ok, int rank, int size, void **all,
                   size_t *total);
    /* rank 0's *v to every rank */
    void (*bcast_int)(int *v);
    void (*finalize)(void);
} gm_mpi_ops;

#endif
