/* gmsim_mpi.c - the MPI calls of `gmsim sweep` (cli/mpi.h), in the module
 * gmsim-mpi.so that cmd_sweep.c loads when a sweep runs over MPI ranks. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli/mpi.h"

static void init(int *rank, int *size)
{
    MPI_Init(NULL, NULL);
    MPI_Comm_rank(MPI_COMM_WORLD, rank);
    MPI_Comm_size(MPI_COMM_WORLD, size);
}

static int node_ranks(void)
{
    MPI_Comm node;
    int local = 1;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    MPI_Comm_size(node, &local);
    MPI_Comm_free(&node);
    return local;
}

/* Out of memory in a collective: the other ranks cannot be told, so the
 * job stops, saying why. */
static void no_memory(void)
{
    fprintf(stderr, "gmsim sweep: out of memory gathering the ranks' rows\n");
    MPI_Abort(MPI_COMM_WORLD, 1);
}

static void gather(const void *mine, int bytes, int ok, int rank, int size, void **all,
                   size_t *total)
{
    *all = NULL;
    *total = 0;
    if (!ok) bytes = 0;
    int *counts = NULL, *displs = NULL;
    if (rank == 0) {
        counts = calloc((size_t)size, sizeof *counts);
        displs = calloc((size_t)size, sizeof *displs);
        if (!counts || !displs) no_memory();
    }
    MPI_Gather(&bytes, 1, MPI_INT, counts, 1, MPI_INT, 0, MPI_COMM_WORLD);
    char *buf = NULL;
    if (rank == 0) {
        size_t n = 0;
        for (int r = 0; r < size; r++) {
            displs[r] = (int)n;
            n += (size_t)counts[r];
        }
        if (!(buf = malloc(n ? n : 1))) no_memory();
        *total = n;
    }
    MPI_Gatherv(mine, bytes, MPI_BYTE, buf, counts, displs, MPI_BYTE, 0, MPI_COMM_WORLD);
    free(counts);
    free(displs);
    *all = buf;
}

static void bcast_int(int *v)
{
    MPI_Bcast(v, 1, MPI_INT, 0, MPI_COMM_WORLD);
}

static void finalize(void)
{
    MPI_Finalize();
}

static const gm_mpi_ops ops = {.abi = GM_MPI_ABI,
                               .init = init,
                               .node_ranks = node_ranks,
                               .gather = gather,
                               .bcast_int = bcast_int,
                               .finalize = finalize};

__attribute__((visibility("default"))) const gm_mpi_ops *gm_mpi_module(void)
{
    return &ops;
}
