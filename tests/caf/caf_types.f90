! caf_types.f90 -- every intrinsic type and kind through coindexed
! put (x(k)[j] = ...), get (y = x(:)[j]) and image-to-image transfer
! (a(:)[j] = b(:)[k], which gfortran emits as _gfortran_caf_sendget):
!   integer(1,2,4,8,16), real(4,8,10,16), complex(4,8,10,16),
!   logical(1,2,4,8), character(kind=1) and character(kind=4) with length.
! Then kind/type conversions on coindexed assignment, in both directions
! (put and get) and image-to-image: integer(8) := integer(2),
! real(4) := real(8), real := integer, integer := real (truncation),
! complex := real, character(len=5) := shorter string (blank padding),
! character := longer string (truncation), character(kind=4) := kind=1.
!
! OpenCoarrays 2.10.1 fails here.  With OpenMPI's default one-sided
! component (osc rdma) it segfaults on >= 2 images (in the real(10)/
! real(16) part); with OMPI_MCA_osc=pt2pt it runs, and then only:
!  * image-to-image transfers with a kind conversion (integer(8)(:)[j] =
!    integer(2)(:)[k]) give wrong values on >= 2 images (gfortran passes
!    the right dst/src kinds to caf_sendget).
! (The real(4)[j] = real(8)[k] check expected the wrong image's value when
! this was written; it was corrected when libcaf_firehose disagreed.)
! (Scalar complex coarrays are not used: gfortran 12 loses stores to a
! scalar complex coarray even with -fcoarray=single -- "complex(8) ::
! z[*]; z = 2.5" leaves garbage in z -- so the conversion target cv_c8 is
! a one-element array.)
! Everything else passes on 1, 2, 3, 4 and 8 images with OpenCoarrays.
!
! Prints "PASS caf_types" on image 1 on success; otherwise
! "FAIL caf_types image <i>: ..." and error stop 1.  Any image count.
program caf_types
  implicit none
  integer, parameter :: nel = 4
  integer, parameter :: ucs4 = selected_char_kind('ISO_10646')
  integer :: me, n, left, right, left2, k
  integer :: idx(nel) = [1, 2, 3, 4]
  character(len=2000) :: buf
  integer(1) :: src_i1(nel)[*], dst_i1(nel)[*], loc_i1(nel)
  integer(2) :: src_i2(nel)[*], dst_i2(nel)[*], loc_i2(nel)
  integer(4) :: src_i4(nel)[*], dst_i4(nel)[*], loc_i4(nel)
  integer(8) :: src_i8(nel)[*], dst_i8(nel)[*], loc_i8(nel)
  integer(16) :: src_i16(nel)[*], dst_i16(nel)[*], loc_i16(nel)
  real(4) :: src_r4(nel)[*], dst_r4(nel)[*], loc_r4(nel)
  real(8) :: src_r8(nel)[*], dst_r8(nel)[*], loc_r8(nel)
  real(10) :: src_r10(nel)[*], dst_r10(nel)[*], loc_r10(nel)
  real(16) :: src_r16(nel)[*], dst_r16(nel)[*], loc_r16(nel)
  complex(4) :: src_c4(nel)[*], dst_c4(nel)[*], loc_c4(nel)
  complex(8) :: src_c8(nel)[*], dst_c8(nel)[*], loc_c8(nel)
  complex(10) :: src_c10(nel)[*], dst_c10(nel)[*], loc_c10(nel)
  complex(16) :: src_c16(nel)[*], dst_c16(nel)[*], loc_c16(nel)
  logical(1) :: src_l1(nel)[*], dst_l1(nel)[*], loc_l1(nel)
  logical(2) :: src_l2(nel)[*], dst_l2(nel)[*], loc_l2(nel)
  logical(4) :: src_l4(nel)[*], dst_l4(nel)[*], loc_l4(nel)
  logical(8) :: src_l8(nel)[*], dst_l8(nel)[*], loc_l8(nel)
  character(len=7, kind=1) :: src_ch1(nel)[*], dst_ch1(nel)[*], loc_ch1(nel)
  character(len=5, kind=ucs4) :: src_ch4(nel)[*], dst_ch4(nel)[*], loc_ch4(nel)
  ! conversion targets
  integer(8) :: cv_i8(3)[*]
  integer(2) :: cv_i2(3)[*], loc_cv_i2(3)
  integer(4) :: cv_i4[*], loc_cv_i4
  real(4) :: cv_r4(2)[*]
  real(8) :: cv_r8[*], loc_cv_r8
  complex(8) :: cv_c8(1)[*]
  character(len=5) :: cv_s5[*], loc_s5
  character(len=3) :: cv_s3[*], loc_s3
  character(len=2) :: short2
  character(len=11) :: long11
  character(len=3, kind=1) :: abc
  character(len=5, kind=ucs4) :: cv_u5[*]

  me = this_image()
  n = num_images()
  left = modulo(me - 2, n) + 1
  right = modulo(me, n) + 1
  left2 = modulo(me - 3, n) + 1

  ! ---- integer(1) ----
  src_i1 = val_i1(me, idx)
  dst_i1 = src_i1
  sync all
  do k = 1, nel
    dst_i1(k)[right] = val_i1(me, k + 10)
  end do
  loc_i1 = src_i1(:)[left]
  sync all
    if (.not. all(dst_i1 == val_i1(left, idx + 10))) then
      write(buf, *) 'expected ', val_i1(left, idx + 10), ' got ', dst_i1
      call fail('integer(1) put element-wise: ' // trim(buf))
    end if
    if (.not. all(loc_i1 == val_i1(left, idx))) then
      write(buf, *) 'expected ', val_i1(left, idx), ' got ', loc_i1
      call fail('integer(1) get whole array: ' // trim(buf))
    end if
  loc_i1(2) = src_i1(3)[right]
    if (.not. all(loc_i1(2:2) == [val_i1(right, 3)])) then
      write(buf, *) 'expected ', val_i1(right, 3), ' got ', loc_i1(2)
      call fail('integer(1) get scalar element: ' // trim(buf))
    end if
  sync all
  dst_i1(:)[right] = src_i1(:)[left]
  sync all
    if (.not. all(dst_i1 == val_i1(left2, idx))) then
      write(buf, *) 'expected ', val_i1(left2, idx), ' got ', dst_i1
      call fail('integer(1) sendget a(:)[j] = b(:)[k]: ' // trim(buf))
    end if
  sync all
  dst_i1(nel)[right] = src_i1(1)[left]
  sync all
    if (.not. all(dst_i1(nel:nel) == [val_i1(left2, 1)])) then
      write(buf, *) 'expected ', val_i1(left2, 1), ' got ', dst_i1(nel)
      call fail('integer(1) sendget scalar: ' // trim(buf))
    end if
  sync all

  ! ---- integer(2) ----
  src_i2 = val_i2(me, idx)
  dst_i2 = src_i2
  sync all
  do k = 1, nel
    dst_i2(k)[right] = val_i2(me, k + 10)
  end do
  loc_i2 = src_i2(:)[left]
  sync all
    if (.not. all(dst_i2 == val_i2(left, idx + 10))) then
      write(buf, *) 'expected ', val_i2(left, idx + 10), ' got ', dst_i2
      call fail('integer(2) put element-wise: ' // trim(buf))
    end if
    if (.not. all(loc_i2 == val_i2(left, idx))) then
      write(buf, *) 'expected ', val_i2(left, idx), ' got ', loc_i2
      call fail('integer(2) get whole array: ' // trim(buf))
    end if
  loc_i2(2) = src_i2(3)[right]
    if (.not. all(loc_i2(2:2) == [val_i2(right, 3)])) then
      write(buf, *) 'expected ', val_i2(right, 3), ' got ', loc_i2(2)
      call fail('integer(2) get scalar element: ' // trim(buf))
    end if
  sync all
  dst_i2(:)[right] = src_i2(:)[left]
  sync all
    if (.not. all(dst_i2 == val_i2(left2, idx))) then
      write(buf, *) 'expected ', val_i2(left2, idx), ' got ', dst_i2
      call fail('integer(2) sendget a(:)[j] = b(:)[k]: ' // trim(buf))
    end if
  sync all
  dst_i2(nel)[right] = src_i2(1)[left]
  sync all
    if (.not. all(dst_i2(nel:nel) == [val_i2(left2, 1)])) then
      write(buf, *) 'expected ', val_i2(left2, 1), ' got ', dst_i2(nel)
      call fail('integer(2) sendget scalar: ' // trim(buf))
    end if
  sync all

  ! ---- integer(4) ----
  src_i4 = val_i4(me, idx)
  dst_i4 = src_i4
  sync all
  do k = 1, nel
    dst_i4(k)[right] = val_i4(me, k + 10)
  end do
  loc_i4 = src_i4(:)[left]
  sync all
    if (.not. all(dst_i4 == val_i4(left, idx + 10))) then
      write(buf, *) 'expected ', val_i4(left, idx + 10), ' got ', dst_i4
      call fail('integer(4) put element-wise: ' // trim(buf))
    end if
    if (.not. all(loc_i4 == val_i4(left, idx))) then
      write(buf, *) 'expected ', val_i4(left, idx), ' got ', loc_i4
      call fail('integer(4) get whole array: ' // trim(buf))
    end if
  loc_i4(2) = src_i4(3)[right]
    if (.not. all(loc_i4(2:2) == [val_i4(right, 3)])) then
      write(buf, *) 'expected ', val_i4(right, 3), ' got ', loc_i4(2)
      call fail('integer(4) get scalar element: ' // trim(buf))
    end if
  sync all
  dst_i4(:)[right] = src_i4(:)[left]
  sync all
    if (.not. all(dst_i4 == val_i4(left2, idx))) then
      write(buf, *) 'expected ', val_i4(left2, idx), ' got ', dst_i4
      call fail('integer(4) sendget a(:)[j] = b(:)[k]: ' // trim(buf))
    end if
  sync all
  dst_i4(nel)[right] = src_i4(1)[left]
  sync all
    if (.not. all(dst_i4(nel:nel) == [val_i4(left2, 1)])) then
      write(buf, *) 'expected ', val_i4(left2, 1), ' got ', dst_i4(nel)
      call fail('integer(4) sendget scalar: ' // trim(buf))
    end if
  sync all

  ! ---- integer(8) ----
  src_i8 = val_i8(me, idx)
  dst_i8 = src_i8
  sync all
  do k = 1, nel
    dst_i8(k)[right] = val_i8(me, k + 10)
  end do
  loc_i8 = src_i8(:)[left]
  sync all
    if (.not. all(dst_i8 == val_i8(left, idx + 10))) then
      write(buf, *) 'expected ', val_i8(left, idx + 10), ' got ', dst_i8
      call fail('integer(8) put element-wise: ' // trim(buf))
    end if
    if (.not. all(loc_i8 == val_i8(left, idx))) then
      write(buf, *) 'expected ', val_i8(left, idx), ' got ', loc_i8
      call fail('integer(8) get whole array: ' // trim(buf))
    end if
  loc_i8(2) = src_i8(3)[right]
    if (.not. all(loc_i8(2:2) == [val_i8(right, 3)])) then
      write(buf, *) 'expected ', val_i8(right, 3), ' got ', loc_i8(2)
      call fail('integer(8) get scalar element: ' // trim(buf))
    end if
  sync all
  dst_i8(:)[right] = src_i8(:)[left]
  sync all
    if (.not. all(dst_i8 == val_i8(left2, idx))) then
      write(buf, *) 'expected ', val_i8(left2, idx), ' got ', dst_i8
      call fail('integer(8) sendget a(:)[j] = b(:)[k]: ' // trim(buf))
    end if
  sync all
  dst_i8(nel)[right] = src_i8(1)[left]
  sync all
    if (.not. all(dst_i8(nel:nel) == [val_i8(left2, 1)])) then
      write(buf, *) 'expected ', val_i8(left2, 1), ' got ', dst_i8(nel)
      call fail('integer(8) sendget scalar: ' // trim(buf))
    end if
  sync all

  ! ---- integer(16) ----
  src_i16 = val_i16(me, idx)
  dst_i16 = src_i16
  sync all
  do k = 1, nel
    dst_i16(k)[right] = val_i16(me, k + 10)
  end do
  loc_i16 = src_i16(:)[left]
  sync all
    if (.not. all(dst_i16 == val_i16(left, idx + 10))) then
      write(buf, *) 'expected ', val_i16(left, idx + 10), ' got ', dst_i16
      call fail('integer(16) put element-wise: ' // trim(buf))
    end if
    if (.not. all(loc_i16 == val_i16(left, idx))) then
      write(buf, *) 'expected ', val_i16(left, idx), ' got ', loc_i16
      call fail('integer(16) get whole array: ' // trim(buf))
    end if
  loc_i16(2) = src_i16(3)[right]
    if (.not. all(loc_i16(2:2) == [val_i16(right, 3)])) then
      write(buf, *) 'expected ', val_i16(right, 3), ' got ', loc_i16(2)
      call fail('integer(16) get scalar element: ' // trim(buf))
    end if
  sync all
  dst_i16(:)[right] = src_i16(:)[left]
  sync all
    if (.not. all(dst_i16 == val_i16(left2, idx))) then
      write(buf, *) 'expected ', val_i16(left2, idx), ' got ', dst_i16
      call fail('integer(16) sendget a(:)[j] = b(:)[k]: ' // trim(buf))
    end if
  sync all
  dst_i16(nel)[right] = src_i16(1)[left]
  sync all
    if (.not. all(dst_i16(nel:nel) == [val_i16(left2, 1)])) then
      write(buf, *) 'expected ', val_i16(left2, 1), ' got ', dst_i16(nel)
      call fail('integer(16) sendget scalar: ' // trim(buf))
    end if
  sync all

  ! ---- real(4) ----
  src_r4 = val_r4(me, idx)
  dst_r4 = src_r4
  sync all
  do k = 1, nel
    dst_r4(k)[right] = val_r4(me, k + 10)
  end do
  loc_r4 = src_r4(:)[left]
  sync all
    if (.not. all(dst_r4 == val_r4(left, idx + 10))) then
      write(buf, *) 'expected ', val_r4(left, idx + 10), ' got ', dst_r4
      call fail('real(4) put element-wise: ' // trim(buf))
    end if
    if (.not. all(loc_r4 == val_r4(left, idx))) then
      write(buf, *) 'expected ', val_r4(left, idx), ' got ', loc_r4
      call fail('real(4) get whole array: ' // trim(buf))
    end if
  loc_r4(2) = src_r4(3)[right]
    if (.not. all(loc_r4(2:2) == [val_r4(right, 3)])) then
      write(buf, *) 'expected ', val_r4(right, 3), ' got ', loc_r4(2)
      call fail('real(4) get scalar element: ' // trim(buf))
    end if
  sync all
  dst_r4(:)[right] = src_r4(:)[left]
  sync all
    if (.not. all(dst_r4 == val_r4(left2, idx))) then
      write(buf, *) 'expected ', val_r4(left2, idx), ' got ', dst_r4
      call fail('real(4) sendget a(:)[j] = b(:)[k]: ' // trim(buf))
    end if
  sync all
  dst_r4(nel)[right] = src_r4(1)[left]
  sync all
    if (.not. all(dst_r4(nel:nel) == [val_r4(left2, 1)])) then
      write(buf, *) 'expected ', val_r4(left2, 1), ' got ', dst_r4(nel)
      call fail('real(4) sendget scalar: ' // trim(buf))
    end if
  sync all

  ! ---- real(8) ----
  src_r8 = val_r8(me, idx)
  dst_r8 = src_r8
  sync all
  do k = 1, nel
    dst_r8(k)[right] = val_r8(me, k + 10)
  end do
  loc_r8 = src_r8(:)[left]
  sync all
    if (.not. all(dst_r8 == val_r8(left, idx + 10))) then
      write(buf, *) 'expected ', val_r8(left, idx + 10), ' got ', dst_r8
      call fail('real(8) put element-wise: ' // trim(buf))
    end if
    if (.not. all(loc_r8 == val_r8(left, idx))) then
      write(buf, *) 'expected ', val_r8(left, idx), ' got ', loc_r8
      call fail('real(8) get whole array: ' // trim(buf))
    end if
  loc_r8(2) = src_r8(3)[right]
    if (.not. all(loc_r8(2:2) == [val_r8(right, 3)])) then
      write(buf, *) 'expected ', val_r8(right, 3), ' got ', loc_r8(2)
      call fail('real(8) get scalar element: ' // trim(buf))
    end if
  sync all
  dst_r8(:)[right] = src_r8(:)[left]
  sync all
    if (.not. all(dst_r8 == val_r8(left2, idx))) then
      write(buf, *) 'expected ', val_r8(left2, idx), ' got ', dst_r8
      call fail('real(8) sendget a(:)[j] = b(:)[k]: ' // trim(buf))
    end if
  sync all
  dst_r8(nel)[right] = src_r8(1)[left]
  sync all
    if (.not. all(dst_r8(nel:nel) == [val_r8(left2, 1)])) then
      write(buf, *) 'expected ', val_r8(left2, 1), ' got ', dst_r8(nel)
      call fail('real(8) sendget scalar: ' // trim(buf))
    end if
  sync all

  ! ---- real(10) ----
  src_r10 = val_r10(me, idx)
  dst_r10 = src_r10
  sync all
  do k = 1, nel
    dst_r10(k)[right] = val_r10(me, k + 10)
  end do
  loc_r10 = src_r10(:)[left]
  sync all
    if (.not. all(dst_r10 == val_r10(left, idx + 10))) then
      write(buf, *) 'expected ', val_r10(left, idx + 10), ' got ', dst_r10
      call fail('real(10) put element-wise: ' // trim(buf))
    end if
    if (.not. all(loc_r10 == val_r10(left, idx))) then
      write(buf, *) 'expected ', val_r10(left, idx), ' got ', loc_r10
      call fail('real(10) get whole array: ' // trim(buf))
    end if
  loc_r10(2) = src_r10(3)[right]
    if (.not. all(loc_r10(2:2) == [val_r10(right, 3)])) then
      write(buf, *) 'expected ', val_r10(right, 3), ' got ', loc_r10(2)
      call fail('real(10) get scalar element: ' // trim(buf))
    end if
  sync all
  dst_r10(:)[right] = src_r10(:)[left]
  sync all
    if (.not. all(dst_r10 == val_r10(left2, idx))) then
      write(buf, *) 'expected ', val_r10(left2, idx), ' got ', dst_r10
      call fail('real(10) sendget a(:)[j] = b(:)[k]: ' // trim(buf))
    end if
  sync all
  dst_r10(nel)[right] = src_r10(1)[left]
  sync all
    if (.not. all(dst_r10(nel:nel) == [val_r10(left2, 1)])) then
      write(buf, *) 'expected ', val_r10(left2, 1), ' got ', dst_r10(nel)
      call fail('real(10) sendget scalar: ' // trim(buf))
    end if
  sync all

  ! ---- real(16) ----
  src_r16 = val_r16(me, idx)
  dst_r16 = src_r16
  sync all
  do k = 1, nel
    dst_r16(k)[right] = val_r16(me, k + 10)
  end do
  loc_r16 = src_r16(:)[left]
  sync all
    if (.not. all(dst_r16 == val_r16(left, idx + 10))) then
      write(buf, *) 'expected ', val_r16(left, idx + 10), ' got ', dst_r16
      call fail('real(16) put element-wise: ' // trim(buf))
    end if
    if (.not. all(loc_r16 == val_r16(left, idx))) then
      write(buf, *) 'expected ', val_r16(left, idx), ' got ', loc_r16
      call fail('real(16) get whole array: ' // trim(buf))
    end if
  loc_r16(2) = src_r16(3)[right]
    if (.not. all(loc_r16(2:2) == [val_r16(right, 3)])) then
      write(buf, *) 'expected ', val_r16(right, 3), ' got ', loc_r16(2)
      call fail('real(16) get scalar element: ' // trim(buf))
    end if
  sync all
  dst_r16(:)[right] = src_r16(:)[left]
  sync all
    if (.not. all(dst_r16 == val_r16(left2, idx))) then
      write(buf, *) 'expected ', val_r16(left2, idx), ' got ', dst_r16
      call fail('real(16) sendget a(:)[j] = b(:)[k]: ' // trim(buf))
    end if
  sync all
  dst_r16(nel)[right] = src_r16(1)[left]
  sync all
    if (.not. all(dst_r16(nel:nel) == [val_r16(left2, 1)])) then
      write(buf, *) 'expected ', val_r16(left2, 1), ' got ', dst_r16(nel)
      call fail('real(16) sendget scalar: ' // trim(buf))
    end if
  sync all

  ! ---- complex(4) ----
  src_c4 = val_c4(me, idx)
  dst_c4 = src_c4
  sync all
  do k = 1, nel
    dst_c4(k)[right] = val_c4(me, k + 10)
  end do
  loc_c4 = src_c4(:)[left]
  sync all
    if (.not. all(dst_c4 == val_c4(left, idx + 10))) then
      write(buf, *) 'expected ', val_c4(left, idx + 10), ' got ', dst_c4
      call fail('complex(4) put element-wise: ' // trim(buf))
    end if
    if (.not. all(loc_c4 == val_c4(left, idx))) then
      write(buf, *) 'expected ', val_c4(left, idx), ' got ', loc_c4
      call fail('complex(4) get whole array: ' // trim(buf))
    end if
  loc_c4(2) = src_c4(3)[right]
    if (.not. all(loc_c4(2:2) == [val_c4(right, 3)])) then
      write(buf, *) 'expected ', val_c4(right, 3), ' got ', loc_c4(2)
      call fail('complex(4) get scalar element: ' // trim(buf))
    end if
  sync all
  dst_c4(:)[right] = src_c4(:)[left]
  sync all
    if (.not. all(dst_c4 == val_c4(left2, idx))) then
      write(buf, *) 'expected ', val_c4(left2, idx), ' got ', dst_c4
      call fail('complex(4) sendget a(:)[j] = b(:)[k]: ' // trim(buf))
    end if
  sync all
  dst_c4(nel)[right] = src_c4(1)[left]
  sync all
    if (.not. all(dst_c4(nel:nel) == [val_c4(left2, 1)])) then
      write(buf, *) 'expected ', val_c4(left2, 1), ' got ', dst_c4(nel)
      call fail('complex(4) sendget scalar: ' // trim(buf))
    end if
  sync all

  ! ---- complex(8) ----
  src_c8 = val_c8(me, idx)
  dst_c8 = src_c8
  sync all
  do k = 1, nel
    dst_c8(k)[right] = val_c8(me, k + 10)
  end do
  loc_c8 = src_c8(:)[left]
  sync all
    if (.not. all(dst_c8 == val_c8(left, idx + 10))) then
      write(buf, *) 'expected ', val_c8(left, idx + 10), ' got ', dst_c8
      call fail('complex(8) put element-wise: ' // trim(buf))
    end if
    if (.not. all(loc_c8 == val_c8(left, idx))) then
      write(buf, *) 'expected ', val_c8(left, idx), ' got ', loc_c8
      call fail('complex(8) get whole array: ' // trim(buf))
    end if
  loc_c8(2) = src_c8(3)[right]
    if (.not. all(loc_c8(2:2) == [val_c8(right, 3)])) then
      write(buf, *) 'expected ', val_c8(right, 3), ' got ', loc_c8(2)
      call fail('complex(8) get scalar element: ' // trim(buf))
    end if
  sync all
  dst_c8(:)[right] = src_c8(:)[left]
  sync all
    if (.not. all(dst_c8 == val_c8(left2, idx))) then
      write(buf, *) 'expected ', val_c8(left2, idx), ' got ', dst_c8
      call fail('complex(8) sendget a(:)[j] = b(:)[k]: ' // trim(buf))
    end if
  sync all
  dst_c8(nel)[right] = src_c8(1)[left]
  sync all
    if (.not. all(dst_c8(nel:nel) == [val_c8(left2, 1)])) then
      write(buf, *) 'expected ', val_c8(left2, 1), ' got ', dst_c8(nel)
      call fail('complex(8) sendget scalar: ' // trim(buf))
    end if
  sync all

  ! ---- complex(10) ----
  src_c10 = val_c10(me, idx)
  dst_c10 = src_c10
  sync all
  do k = 1, nel
    dst_c10(k)[right] = val_c10(me, k + 10)
  end do
  loc_c10 = src_c10(:)[left]
  sync all
    if (.not. all(dst_c10 == val_c10(left, idx + 10))) then
      write(buf, *) 'expected ', val_c10(left, idx + 10), ' got ', dst_c10
      call fail('complex(10) put element-wise: ' // trim(buf))
    end if
    if (.not. all(loc_c10 == val_c10(left, idx))) then
      write(buf, *) 'expected ', val_c10(left, idx), ' got ', loc_c10
      call fail('complex(10) get whole array: ' // trim(buf))
    end if
  loc_c10(2) = src_c10(3)[right]
    if (.not. all(loc_c10(2:2) == [val_c10(right, 3)])) then
      write(buf, *) 'expected ', val_c10(right, 3), ' got ', loc_c10(2)
      call fail('complex(10) get scalar element: ' // trim(buf))
    end if
  sync all
  dst_c10(:)[right] = src_c10(:)[left]
  sync all
    if (.not. all(dst_c10 == val_c10(left2, idx))) then
      write(buf, *) 'expected ', val_c10(left2, idx), ' got ', dst_c10
      call fail('complex(10) sendget a(:)[j] = b(:)[k]: ' // trim(buf))
    end if
  sync all
  dst_c10(nel)[right] = src_c10(1)[left]
  sync all
    if (.not. all(dst_c10(nel:nel) == [val_c10(left2, 1)])) then
      write(buf, *) 'expected ', val_c10(left2, 1), ' got ', dst_c10(nel)
      call fail('complex(10) sendget scalar: ' // trim(buf))
    end if
  sync all

  ! ---- complex(16) ----
  src_c16 = val_c16(me, idx)
  dst_c16 = src_c16
  sync all
  do k = 1, nel
    dst_c16(k)[right] = val_c16(me, k + 10)
  end do
  loc_c16 = src_c16(:)[left]
  sync all
    if (.not. all(dst_c16 == val_c16(left, idx + 10))) then
      write(buf, *) 'expected ', val_c16(left, idx + 10), ' got ', dst_c16
      call fail('complex(16) put element-wise: ' // trim(buf))
    end if
    if (.not. all(loc_c16 == val_c16(left, idx))) then
      write(buf, *) 'expected ', val_c16(left, idx), ' got ', loc_c16
      call fail('complex(16) get whole array: ' // trim(buf))
    end if
  loc_c16(2) = src_c16(3)[right]
    if (.not. all(loc_c16(2:2) == [val_c16(right, 3)])) then
      write(buf, *) 'expected ', val_c16(right, 3), ' got ', loc_c16(2)
      call fail('complex(16) get scalar element: ' // trim(buf))
    end if
  sync all
  dst_c16(:)[right] = src_c16(:)[left]
  sync all
    if (.not. all(dst_c16 == val_c16(left2, idx))) then
      write(buf, *) 'expected ', val_c16(left2, idx), ' got ', dst_c16
      call fail('complex(16) sendget a(:)[j] = b(:)[k]: ' // trim(buf))
    end if
  sync all
  dst_c16(nel)[right] = src_c16(1)[left]
  sync all
    if (.not. all(dst_c16(nel:nel) == [val_c16(left2, 1)])) then
      write(buf, *) 'expected ', val_c16(left2, 1), ' got ', dst_c16(nel)
      call fail('complex(16) sendget scalar: ' // trim(buf))
    end if
  sync all

  ! ---- logical(1) ----
  src_l1 = val_l1(me, idx)
  dst_l1 = src_l1
  sync all
  do k = 1, nel
    dst_l1(k)[right] = val_l1(me, k + 10)
  end do
  loc_l1 = src_l1(:)[left]
  sync all
    if (.not. all(dst_l1 .eqv. val_l1(left, idx + 10))) then
      write(buf, *) 'expected ', val_l1(left, idx + 10), ' got ', dst_l1
      call fail('logical(1) put element-wise: ' // trim(buf))
    end if
    if (.not. all(loc_l1 .eqv. val_l1(left, idx))) then
      write(buf, *) 'expected ', val_l1(left, idx), ' got ', loc_l1
      call fail('logical(1) get whole array: ' // trim(buf))
    end if
  loc_l1(2) = src_l1(3)[right]
    if (.not. all(loc_l1(2:2) .eqv. [val_l1(right, 3)])) then
      write(buf, *) 'expected ', val_l1(right, 3), ' got ', loc_l1(2)
      call fail('logical(1) get scalar element: ' // trim(buf))
    end if
  sync all
  dst_l1(:)[right] = src_l1(:)[left]
  sync all
    if (.not. all(dst_l1 .eqv. val_l1(left2, idx))) then
      write(buf, *) 'expected ', val_l1(left2, idx), ' got ', dst_l1
      call fail('logical(1) sendget a(:)[j] = b(:)[k]: ' // trim(buf))
    end if
  sync all
  dst_l1(nel)[right] = src_l1(1)[left]
  sync all
    if (.not. all(dst_l1(nel:nel) .eqv. [val_l1(left2, 1)])) then
      write(buf, *) 'expected ', val_l1(left2, 1), ' got ', dst_l1(nel)
      call fail('logical(1) sendget scalar: ' // trim(buf))
    end if
  sync all

  ! ---- logical(2) ----
  src_l2 = val_l2(me, idx)
  dst_l2 = src_l2
  sync all
  do k = 1, nel
    dst_l2(k)[right] = val_l2(me, k + 10)
  end do
  loc_l2 = src_l2(:)[left]
  sync all
    if (.not. all(dst_l2 .eqv. val_l2(left, idx + 10))) then
      write(buf, *) 'expected ', val_l2(left, idx + 10), ' got ', dst_l2
      call fail('logical(2) put element-wise: ' // trim(buf))
    end if
    if (.not. all(loc_l2 .eqv. val_l2(left, idx))) then
      write(buf, *) 'expected ', val_l2(left, idx), ' got ', loc_l2
      call fail('logical(2) get whole array: ' // trim(buf))
    end if
  loc_l2(2) = src_l2(3)[right]
    if (.not. all(loc_l2(2:2) .eqv. [val_l2(right, 3)])) then
      write(buf, *) 'expected ', val_l2(right, 3), ' got ', loc_l2(2)
      call fail('logical(2) get scalar element: ' // trim(buf))
    end if
  sync all
  dst_l2(:)[right] = src_l2(:)[left]
  sync all
    if (.not. all(dst_l2 .eqv. val_l2(left2, idx))) then
      write(buf, *) 'expected ', val_l2(left2, idx), ' got ', dst_l2
      call fail('logical(2) sendget a(:)[j] = b(:)[k]: ' // trim(buf))
    end if
  sync all
  dst_l2(nel)[right] = src_l2(1)[left]
  sync all
    if (.not. all(dst_l2(nel:nel) .eqv. [val_l2(left2, 1)])) then
      write(buf, *) 'expected ', val_l2(left2, 1), ' got ', dst_l2(nel)
      call fail('logical(2) sendget scalar: ' // trim(buf))
    end if
  sync all

  ! ---- logical(4) ----
  src_l4 = val_l4(me, idx)
  dst_l4 = src_l4
  sync all
  do k = 1, nel
    dst_l4(k)[right] = val_l4(me, k + 10)
  end do
  loc_l4 = src_l4(:)[left]
  sync all
    if (.not. all(dst_l4 .eqv. val_l4(left, idx + 10))) then
      write(buf, *) 'expected ', val_l4(left, idx + 10), ' got ', dst_l4
      call fail('logical(4) put element-wise: ' // trim(buf))
    end if
    if (.not. all(loc_l4 .eqv. val_l4(left, idx))) then
      write(buf, *) 'expected ', val_l4(left, idx), ' got ', loc_l4
      call fail('logical(4) get whole array: ' // trim(buf))
    end if
  loc_l4(2) = src_l4(3)[right]
    if (.not. all(loc_l4(2:2) .eqv. [val_l4(right, 3)])) then
      write(buf, *) 'expected ', val_l4(right, 3), ' got ', loc_l4(2)
      call fail('logical(4) get scalar element: ' // trim(buf))
    end if
  sync all
  dst_l4(:)[right] = src_l4(:)[left]
  sync all
    if (.not. all(dst_l4 .eqv. val_l4(left2, idx))) then
      write(buf, *) 'expected ', val_l4(left2, idx), ' got ', dst_l4
      call fail('logical(4) sendget a(:)[j] = b(:)[k]: ' // trim(buf))
    end if
  sync all
  dst_l4(nel)[right] = src_l4(1)[left]
  sync all
    if (.not. all(dst_l4(nel:nel) .eqv. [val_l4(left2, 1)])) then
      write(buf, *) 'expected ', val_l4(left2, 1), ' got ', dst_l4(nel)
      call fail('logical(4) sendget scalar: ' // trim(buf))
    end if
  sync all

  ! ---- logical(8) ----
  src_l8 = val_l8(me, idx)
  dst_l8 = src_l8
  sync all
  do k = 1, nel
    dst_l8(k)[right] = val_l8(me, k + 10)
  end do
  loc_l8 = src_l8(:)[left]
  sync all
    if (.not. all(dst_l8 .eqv. val_l8(left, idx + 10))) then
      write(buf, *) 'expected ', val_l8(left, idx + 10), ' got ', dst_l8
      call fail('logical(8) put element-wise: ' // trim(buf))
    end if
    if (.not. all(loc_l8 .eqv. val_l8(left, idx))) then
      write(buf, *) 'expected ', val_l8(left, idx), ' got ', loc_l8
      call fail('logical(8) get whole array: ' // trim(buf))
    end if
  loc_l8(2) = src_l8(3)[right]
    if (.not. all(loc_l8(2:2) .eqv. [val_l8(right, 3)])) then
      write(buf, *) 'expected ', val_l8(right, 3), ' got ', loc_l8(2)
      call fail('logical(8) get scalar element: ' // trim(buf))
    end if
  sync all
  dst_l8(:)[right] = src_l8(:)[left]
  sync all
    if (.not. all(dst_l8 .eqv. val_l8(left2, idx))) then
      write(buf, *) 'expected ', val_l8(left2, idx), ' got ', dst_l8
      call fail('logical(8) sendget a(:)[j] = b(:)[k]: ' // trim(buf))
    end if
  sync all
  dst_l8(nel)[right] = src_l8(1)[left]
  sync all
    if (.not. all(dst_l8(nel:nel) .eqv. [val_l8(left2, 1)])) then
      write(buf, *) 'expected ', val_l8(left2, 1), ' got ', dst_l8(nel)
      call fail('logical(8) sendget scalar: ' // trim(buf))
    end if
  sync all

  ! ---- character(len=7, kind=1) ----
  src_ch1 = val_ch1(me, idx)
  dst_ch1 = src_ch1
  sync all
  do k = 1, nel
    dst_ch1(k)[right] = val_ch1(me, k + 10)
  end do
  loc_ch1 = src_ch1(:)[left]
  sync all
    if (.not. all(dst_ch1 == val_ch1(left, idx + 10))) then
      write(buf, *) 'expected ', val_ch1(left, idx + 10), ' got ', dst_ch1
      call fail('character(len=7, kind=1) put element-wise: ' // trim(buf))
    end if
    if (.not. all(loc_ch1 == val_ch1(left, idx))) then
      write(buf, *) 'expected ', val_ch1(left, idx), ' got ', loc_ch1
      call fail('character(len=7, kind=1) get whole array: ' // trim(buf))
    end if
  loc_ch1(2) = src_ch1(3)[right]
    if (.not. all(loc_ch1(2:2) == [val_ch1(right, 3)])) then
      write(buf, *) 'expected ', val_ch1(right, 3), ' got ', loc_ch1(2)
      call fail('character(len=7, kind=1) get scalar element: ' // trim(buf))
    end if
  sync all
  dst_ch1(:)[right] = src_ch1(:)[left]
  sync all
    if (.not. all(dst_ch1 == val_ch1(left2, idx))) then
      write(buf, *) 'expected ', val_ch1(left2, idx), ' got ', dst_ch1
      call fail('character(len=7, kind=1) sendget a(:)[j] = b(:)[k]: ' // trim(buf))
    end if
  sync all
  dst_ch1(nel)[right] = src_ch1(1)[left]
  sync all
    if (.not. all(dst_ch1(nel:nel) == [val_ch1(left2, 1)])) then
      write(buf, *) 'expected ', val_ch1(left2, 1), ' got ', dst_ch1(nel)
      call fail('character(len=7, kind=1) sendget scalar: ' // trim(buf))
    end if
  sync all

  ! ---- character(len=5, kind=ucs4) ----
  src_ch4 = val_ch4(me, idx)
  dst_ch4 = src_ch4
  sync all
  do k = 1, nel
    dst_ch4(k)[right] = val_ch4(me, k + 10)
  end do
  loc_ch4 = src_ch4(:)[left]
  sync all
    if (.not. all(dst_ch4 == val_ch4(left, idx + 10))) then
      write(buf, *) 'expected ', val_ch4(left, idx + 10), ' got ', dst_ch4
      call fail('character(len=5, kind=ucs4) put element-wise: ' // trim(buf))
    end if
    if (.not. all(loc_ch4 == val_ch4(left, idx))) then
      write(buf, *) 'expected ', val_ch4(left, idx), ' got ', loc_ch4
      call fail('character(len=5, kind=ucs4) get whole array: ' // trim(buf))
    end if
  loc_ch4(2) = src_ch4(3)[right]
    if (.not. all(loc_ch4(2:2) == [val_ch4(right, 3)])) then
      write(buf, *) 'expected ', val_ch4(right, 3), ' got ', loc_ch4(2)
      call fail('character(len=5, kind=ucs4) get scalar element: ' // trim(buf))
    end if
  sync all
  dst_ch4(:)[right] = src_ch4(:)[left]
  sync all
    if (.not. all(dst_ch4 == val_ch4(left2, idx))) then
      write(buf, *) 'expected ', val_ch4(left2, idx), ' got ', dst_ch4
      call fail('character(len=5, kind=ucs4) sendget a(:)[j] = b(:)[k]: ' // trim(buf))
    end if
  sync all
  dst_ch4(nel)[right] = src_ch4(1)[left]
  sync all
    if (.not. all(dst_ch4(nel:nel) == [val_ch4(left2, 1)])) then
      write(buf, *) 'expected ', val_ch4(left2, 1), ' got ', dst_ch4(nel)
      call fail('character(len=5, kind=ucs4) sendget scalar: ' // trim(buf))
    end if
  sync all
  ! ---- conversions on coindexed assignment ---------------------------
  ! put: integer(8) coarray := integer(2) values
  cv_i8 = 0
  cv_i2 = int([me, -me, 2 * me], 2)
  cv_r4 = 0
  cv_r8 = 0
  cv_i4 = 0
  cv_c8 = (0d0, 0d0)
  cv_s5 = 'XXXXX'
  cv_s3 = 'YYY'
  sync all
  cv_i8(:)[right] = int([-30000, 30001, me], 2)
  cv_r4(1)[right] = 1d0 / 3d0 + me
  cv_r8[right] = -7 * me
  cv_i4[right] = 3.75d0 + me
  cv_c8(1)[right] = 2.5 * me
  ! gfortran 12 describes a character *expression* on the right-hand side
  ! of a coindexed put with elem_len=0 (so any library stores blanks);
  ! named variables of the shorter/longer length are described correctly.
  short2 = achar(96 + me) // 'b'
  long11 = 'long' // achar(96 + me) // 'string'
  cv_s5[right] = short2
  cv_s3[right] = long11
  sync all
  if (any(cv_i8 /= [-30000_8, 30001_8, int(left, 8)])) then
    write(buf, *) cv_i8
    call fail('integer(8)(:)[j] = integer(2) values: got ' // trim(buf))
  end if
  if (cv_r4(1) /= real(1d0 / 3d0 + left, 4)) then
    write(buf, *) 'expected ', real(1d0 / 3d0 + left, 4), ' got ', cv_r4(1)
    call fail('real(4)[j] = real(8): ' // trim(buf))
  end if
  if (cv_r8 /= -7d0 * left) call fail('real(8)[j] = integer')
  if (cv_i4 /= 3 + left) then
    write(buf, *) 'expected ', 3 + left, ' got ', cv_i4
    call fail('integer[j] = real (truncation): ' // trim(buf))
  end if
  if (cv_c8(1) /= cmplx(2.5d0 * left, 0d0, 8)) call fail('complex(8)(1)[j] = real(4)')
  loc_s5 = cv_s5
  if (loc_s5 /= achar(96 + left) // 'b' .or. loc_s5(3:5) /= '   ') &
    call fail('character(5)[j] = shorter string: got "' // loc_s5 // '" expected blank padding')
  if (cv_s3 /= 'lon') call fail('character(3)[j] = longer string: got "' // cv_s3 // '" expected "lon"')
  sync all
  ! get with conversion: integer(2) := integer(8)[j], integer(4) := real[j], real(8) := real(4)[j]
  loc_cv_i2 = cv_i8(:)[right]
  if (any(loc_cv_i2 /= int([-30000, 30001, me], 2))) call fail('integer(2) = integer(8)(:)[j]')
  loc_cv_i4 = cv_r8[right]
  if (loc_cv_i4 /= -7 * me) call fail('integer(4) = real(8)[j]')
  loc_cv_r8 = cv_r4(1)[right]
  if (loc_cv_r8 /= real(real(1d0 / 3d0 + me, 4), 8)) call fail('real(8) = real(4)[j]')
  loc_s5 = cv_s3[right]
  if (loc_s5 /= 'lon  ') call fail('character(5) = character(3)[j] (padding on get): got "' // loc_s5 // '"')
  loc_s3 = cv_s5[right]
  if (loc_s3 /= achar(96 + me) // 'b ') call fail('character(3) = character(5)[j] (truncation on get)')
  sync all
  ! image-to-image with conversion: integer(8)(:)[j] = integer(2)(:)[k]
  cv_i8(:)[right] = cv_i2(:)[left]
  cv_r4(2)[right] = cv_r8[left]
  sync all
  if (any(cv_i8 /= [int(left2, 8), -int(left2, 8), 2 * int(left2, 8)])) then
    write(buf, *) cv_i8
    call fail('sendget integer(8)(:)[j] = integer(2)(:)[k]: got ' // trim(buf))
  end if
  ! cv_r8 on image k was written by image k-1 (-7 * (k-1)); image me-1 sent
  ! us cv_r8 of image me-2, so we hold -7 * (me-3).
  if (cv_r4(2) /= real(-7 * (modulo(me - 4, n) + 1), 4)) call fail('sendget real(4)[j] = real(8)[k]')
  sync all
  ! character kind conversion: kind=4 coarray := kind=1 string
  cv_u5 = ucs4_'?????'
  sync all
  abc = 'ab' // achar(64 + me)
  cv_u5[right] = abc
  sync all
  if (cv_u5 /= ucs4_'ab' // achar(64 + left, ucs4) // ucs4_'  ') call fail('character(kind=4)[j] = character(kind=1)')

  sync all
  if (me == 1) write(*, '(a)') 'PASS caf_types'

contains

  subroutine fail(what)
    character(*), intent(in) :: what
    write(*, '(a,i0,a)') 'FAIL caf_types image ', this_image(), ': ' // what
    error stop 1
  end subroutine fail

  elemental function val_i1(img, k) result(v)
    integer, intent(in) :: img, k
    integer(1) :: v
    v = int(img * 10 + k, 1)
  end function val_i1

  elemental function val_i2(img, k) result(v)
    integer, intent(in) :: img, k
    integer(2) :: v
    v = int(img * 1000 + k, 2)
  end function val_i2

  elemental function val_i4(img, k) result(v)
    integer, intent(in) :: img, k
    integer(4) :: v
    v = int(img * 100000000 + k, 4)
  end function val_i4

  elemental function val_i8(img, k) result(v)
    integer, intent(in) :: img, k
    integer(8) :: v
    v = int(img, 8) * 2_8**40 + k
  end function val_i8

  elemental function val_i16(img, k) result(v)
    integer, intent(in) :: img, k
    integer(16) :: v
    v = int(img, 16) * 2_16**100 + k
  end function val_i16

  elemental function val_r4(img, k) result(v)
    integer, intent(in) :: img, k
    real(4) :: v
    v = real(img, 4) + real(k, 4) / 3
  end function val_r4

  elemental function val_r8(img, k) result(v)
    integer, intent(in) :: img, k
    real(8) :: v
    v = real(img, 8) + real(k, 8) / 3
  end function val_r8

  elemental function val_r10(img, k) result(v)
    integer, intent(in) :: img, k
    real(10) :: v
    v = real(img, 10) + real(k, 10) / 3
  end function val_r10

  elemental function val_r16(img, k) result(v)
    integer, intent(in) :: img, k
    real(16) :: v
    v = real(img, 16) + real(k, 16) / 3
  end function val_r16

  elemental function val_c4(img, k) result(v)
    integer, intent(in) :: img, k
    complex(4) :: v
    v = cmplx(img + k, -real(img * k, 4) / 7, 4)
  end function val_c4

  elemental function val_c8(img, k) result(v)
    integer, intent(in) :: img, k
    complex(8) :: v
    v = cmplx(img + k, -real(img * k, 8) / 7, 8)
  end function val_c8

  elemental function val_c10(img, k) result(v)
    integer, intent(in) :: img, k
    complex(10) :: v
    v = cmplx(img + k, -real(img * k, 10) / 7, 10)
  end function val_c10

  elemental function val_c16(img, k) result(v)
    integer, intent(in) :: img, k
    complex(16) :: v
    v = cmplx(img + k, -real(img * k, 16) / 7, 16)
  end function val_c16

  elemental function val_l1(img, k) result(v)
    integer, intent(in) :: img, k
    logical(1) :: v
    v = logical(mod(img + k, 2) == 0, 1)
  end function val_l1

  elemental function val_l2(img, k) result(v)
    integer, intent(in) :: img, k
    logical(2) :: v
    v = logical(mod(img + k, 3) == 0, 2)
  end function val_l2

  elemental function val_l4(img, k) result(v)
    integer, intent(in) :: img, k
    logical(4) :: v
    v = logical(mod(img * k, 2) == 1, 4)
  end function val_l4

  elemental function val_l8(img, k) result(v)
    integer, intent(in) :: img, k
    logical(8) :: v
    v = logical(mod(img + 2 * k, 3) /= 1, 8)
  end function val_l8

  elemental function val_ch1(img, k) result(v)
    integer, intent(in) :: img, k
    character(len=7, kind=1) :: v
    v = 'im' // achar(64 + img) // '-k' // achar(48 + k) // '!'
  end function val_ch1

  elemental function val_ch4(img, k) result(v)
    integer, intent(in) :: img, k
    character(len=5, kind=ucs4) :: v
    v = achar(int(z'4E00') + img * 16 + k, ucs4) // ucs4_'a' // achar(int(z'1F600') + k, ucs4) // ucs4_'zz'
  end function val_ch4
end program caf_types
