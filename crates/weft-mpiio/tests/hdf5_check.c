/*
 * hdf5_check: a 2-D dataset of ints written collectively through HDF5's MPI-IO driver
 * (H5Pset_fapl_mpio, H5FD_MPIO_COLLECTIVE), each rank a block of rows and, in a second
 * dataset, a block of columns (a non-contiguous selection in the file); read back
 * collectively and compared. Value of element (i, j): i * 100003 + j.
 *
 *   mpirun -n P hdf5_check_openmpi FILE ROWS COLS
 * Prints "all checks held". h5dump of the file shows the same values (the Rust test and
 * scripts compare it).
 */
#include <hdf5.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, nprocs;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
    if (argc < 4) {
        fprintf(stderr, "usage: hdf5_check FILE ROWS COLS\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    hsize_t rows = (hsize_t)atol(argv[2]), cols = (hsize_t)atol(argv[3]);
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    H5Pset_fapl_mpio(fapl, MPI_COMM_WORLD, MPI_INFO_NULL);
    hid_t file = H5Fcreate(argv[1], H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
    if (file < 0) {
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    hid_t xfer = H5Pcreate(H5P_DATASET_XFER);
    H5Pset_dxpl_mpio(xfer, H5FD_MPIO_COLLECTIVE);
    hsize_t dims[2] = {rows, cols};
    int failed = 0;
    for (int pass = 0; pass < 2; pass++) {
        /* pass 0: rows split over the ranks; pass 1: columns */
        int d = pass;
        hsize_t q = dims[d] / (hsize_t)nprocs, rem = dims[d] % (hsize_t)nprocs;
        hsize_t mine = q + ((hsize_t)rank < rem), start = (hsize_t)rank * q + ((hsize_t)rank < rem ? (hsize_t)rank : rem);
        hsize_t off[2] = {0, 0}, cnt[2] = {rows, cols};
        off[d] = start;
        cnt[d] = mine;
        hid_t space = H5Screate_simple(2, dims, NULL);
        hid_t dset = H5Dcreate2(file, pass ? "columns" : "rows", H5T_NATIVE_INT, space, H5P_DEFAULT, H5P_DEFAULT,
                                H5P_DEFAULT);
        H5Sselect_hyperslab(space, H5S_SELECT_SET, off, NULL, cnt, NULL);
        hid_t mem = H5Screate_simple(2, cnt, NULL);
        size_t n = (size_t)(cnt[0] * cnt[1]);
        int *buf = malloc(sizeof(int) * (n ? n : 1)), *back = malloc(sizeof(int) * (n ? n : 1));
        for (hsize_t i = 0; i < cnt[0]; i++) {
            for (hsize_t j = 0; j < cnt[1]; j++) {
                buf[i * cnt[1] + j] = (int)((off[0] + i) * 100003 + off[1] + j);
            }
        }
        if (H5Dwrite(dset, H5T_NATIVE_INT, mem, space, xfer, buf) < 0) {
            failed = 1;
        }
        H5Fflush(file, H5F_SCOPE_GLOBAL);
        if (H5Dread(dset, H5T_NATIVE_INT, mem, space, xfer, back) < 0) {
            failed = 1;
        }
        for (size_t k = 0; k < n && !failed; k++) {
            if (back[k] != buf[k]) {
                fprintf(stderr, "rank %d: %s element %zu reads %d, not %d\n", rank, pass ? "columns" : "rows", k,
                        back[k], buf[k]);
                failed = 1;
            }
        }
        free(buf);
        free(back);
        H5Sclose(mem);
        H5Sclose(space);
        H5Dclose(dset);
    }
    H5Pclose(xfer);
    H5Pclose(fapl);
    H5Fclose(file);
    int any = 0;
    MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (rank == 0 && !any) {
        printf("all checks held\n");
    }
    MPI_Finalize();
    return any;
}
