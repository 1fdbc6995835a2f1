// <mpi.h> without OpenMPI's deprecated C++ bindings (which would need libmpi_cxx). Every file
// of the backend includes MPI through this header.
#pragma once

#ifndef OMPI_SKIP_MPICXX
#define OMPI_SKIP_MPICXX 1
#endif
#ifndef MPICH_SKIP_MPICXX
#define MPICH_SKIP_MPICXX 1
#endif
#include <mpi.h>
