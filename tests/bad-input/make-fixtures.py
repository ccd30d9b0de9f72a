#!/usr/bin/python3
"""Regenerates the checked-in fixtures of the bad-input catalogue
(tests/bad-input/cases.tsv).  Not run by the tests: the fixtures are
committed so the catalogue needs neither h5py nor the sqlite3 shell.

    /usr/bin/python3 tests/bad-input/make-fixtures.py tests/bad-input

(HDF5 stores group modification times, so the bytes differ from run to run;
the content, and the check each file fails, do not.)

Native traces (docs/trace-files.md), written without the 512-byte
integrity user block (the loader then skips the CRC check, as for any
h5py-written file) so that each file reaches the check it is made to fail:
  native-ok.h5         a valid 1-rank trace with 2 kernel ops (control)
  native-version.h5    format_version = 99
  native-noops.h5      /ranks/0/ops missing
  native-badshape.h5   op 1 names shape 7 (the file has 1 shape)
Nsight Systems SQLite exports (page size 512 to keep them small):
  nsys-notables.sqlite a database without the CUPTI tables
  nsys-empty.sqlite    the kernel table present but empty
  nsys-overflow.sqlite a kernel from INT64_MIN to INT64_MAX ns
"""
import os
import sqlite3
import sys

import h5py
import numpy as np

OPS = np.dtype({'names': ['ref_ns', 'shape', 'name', 'peer', 'wait',
                          'microbatch', 'layer', 'kind', 'class', 'phase',
                          'stream'],
                'formats': ['<i8', '<u4', '<u4', '<u4', '<u4', '<u2', 'u1',
                            'u1', 'u1', 'u1', 'u1'],
                'offsets': [0, 8, 12, 16, 20, 24, 26, 27, 28, 29, 30],
                'itemsize': 32})
SHAPES = np.dtype({'names': ['flops', 'bytes', 'name', 'klass', 'coll',
                             'tensor'],
                   'formats': ['<f8', '<f8', '<u4', 'u1', 'u1', 'u1'],
                   'offsets': [0, 8, 16, 20, 21, 22], 'itemsize': 24})
NONE = 0xFFFFFFFF


def native(path, version=1, ops=True, shape1=0):
    with h5py.File(path, 'w', libver='latest') as f:
        u32 = np.uint32
        f.attrs['format'] = np.bytes_(b'joulesim-trace')
        f.attrs['format_version'] = u32(version)
        f.attrs['n_ranks'] = u32(1)
        for k in ('tp', 'pp', 'dp', 'microbatches'):
            f.attrs[k] = u32(1)
        f.attrs['tokens_per_iteration'] = np.float64(2048)
        f.attrs['joulesim_version'] = np.bytes_(b'bad-input fixture')
        f.create_dataset('strings', data=['gemm_kernel', 'softmax_kernel'],
                         dtype=h5py.string_dtype('utf-8'), track_times=False)
        f.create_dataset('shapes', data=np.array(
            [(1e9, 1e6, 0, 0, 0, 1)], dtype=SHAPES), track_times=False)
        f.create_dataset('groups/offsets', data=np.array([0], dtype=u32),
                         track_times=False)
        f.create_dataset('groups/ranks', data=np.array([], dtype=u32),
                         track_times=False)
        r = f.create_group('ranks/0')
        r.attrs['stage'] = u32(0)
        if ops:
            # kind 0 kernel, class 0 gemm / 4 softmax, phase 0 forward
            r.create_dataset('ops', data=np.array(
                [(100000, 0, 0, NONE, NONE, 0, 0, 0, 0, 0, 0),
                 (20000, shape1, 1, NONE, NONE, 0, 0, 0, 4, 0, 0)],
                dtype=OPS), track_times=False)
        r.create_dataset('stream_off', data=np.array([0, 2], dtype=u32),
                         track_times=False)
        f.create_group('provenance').attrs['source'] = np.bytes_(
            b'make-fixtures.py')


def nsys(path, sql):
    if os.path.exists(path):
        os.unlink(path)
    db = sqlite3.connect(path)
    db.executescript('PRAGMA page_size=512;' + sql)
    db.commit()
    db.close()


def main(out):
    native(os.path.join(out, 'native-ok.h5'))
    native(os.path.join(out, 'native-version.h5'), version=99)
    native(os.path.join(out, 'native-noops.h5'), ops=False)
    native(os.path.join(out, 'native-badshape.h5'), shape1=7)
    kernel = ('CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL(start INTEGER, '
              '"end" INTEGER, deviceId INTEGER, streamId INTEGER, '
              'correlationId INTEGER, shortName INTEGER);'
              'CREATE TABLE StringIds(id INTEGER, value TEXT);')
    nsys(os.path.join(out, 'nsys-notables.sqlite'),
         'CREATE TABLE StringIds(id INTEGER, value TEXT);')
    nsys(os.path.join(out, 'nsys-empty.sqlite'), kernel)
    nsys(os.path.join(out, 'nsys-overflow.sqlite'), kernel +
         "INSERT INTO StringIds VALUES(1, 'gemm_kernel');"
         'INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES('
         '-9223372036854775808, 9223372036854775807, 0, 7, 1, 1);')


if __name__ == '__main__':
    main(sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(__file__))
