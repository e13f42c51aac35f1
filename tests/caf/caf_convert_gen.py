#!/usr/bin/env python3
"""caf_convert_gen.py -- writes caf_convert.f90 and caf_ref_convert.f90.

    python3 tests/caf/caf_convert_gen.py tests/caf

The two tests check coindexed intrinsic assignment between every pair of
types of one class -- integer(1,2,4,8) and real(4,8) (integer <-> real
conversions truncate toward zero), character(len=3|7, kind=1) and
character(len=5, kind=4) (blank padding, truncation, kind 1 <-> 4),
logical(1,4) -- on every side of a transfer (send x(..)[j] = y, get
y = x(..)[j], image to image x(..)[j] = y(..)[k]) and in every shape: whole
arrays, sections, stride 2, negative strides, (::2) and open sections,
single elements, scalars, a scalar broadcast to a section, 2-D sections,
a 2-D column or row against a 1-D section, zero-size sections.
caf_convert covers coarrays (caf_send/get/sendget); caf_ref_convert
covers allocatable and fixed-size components of derived-type coarrays
(the *_by_ref calls), allocatable left-hand sides (get_by_ref) and a
component across an array of derived type (span != element size).

Every pair meets every side once, in a shape that cycles through the
list; a few pairs go through every shape.  The expected value of each
statement is the same assignment done locally (Fortran's own intrinsic
assignment), on the values the source image holds.  Generated: edit this
file, not the .f90 files.
"""
import sys

NUM = ['i1', 'i2', 'i4', 'i8', 'r4', 'r8']
CHR = ['c1_3', 'c1_7', 'c4_5']
LOG = ['l1', 'l4']
TYPES = NUM + CHR + LOG
DECL = {'i1': 'integer(1)', 'i2': 'integer(2)', 'i4': 'integer(4)',
        'i8': 'integer(8)', 'r4': 'real(4)', 'r8': 'real(8)',
        'c1_3': 'character(len=3)', 'c1_7': 'character(len=7)',
        'c4_5': 'character(len=5,kind=ucs4)', 'l1': 'logical(1)',
        'l4': 'logical(4)'}
PAIRS = [(a, b) for g in (NUM, CHR, LOG) for a in g for b in g]
# Pairs that go through every shape on every side.
FULL = [('i4', 'r8'), ('r8', 'i1'), ('i8', 'i2'), ('c4_5', 'c1_7'),
        ('c1_3', 'c4_5')]

# (name, lhs rank, lhs subscripts, rhs rank, rhs subscripts); rank 's' is
# a scalar, 1 a 10-element array, 2 a 4x4 array.
SHAPES = [
    ('whole', '1', '(:)', '1', '(:)'),
    ('section', '1', '(2:6)', '1', '(4:8)'),
    ('stride 2 lhs', '1', '(1:9:2)', '1', '(2:6)'),
    ('stride 2 rhs', '1', '(2:6)', '1', '(1:10:2)'),
    ('(::2) lhs', '1', '(::2)', '1', '(2::2)'),
    ('(::2) rhs', '1', '(6:10)', '1', '(::2)'),
    ('open', '1', '(:5)', '1', '(6:)'),
    ('negative lhs', '1', '(9:1:-2)', '1', '(1:5)'),
    ('negative rhs', '1', '(1:5)', '1', '(10:2:-2)'),
    ('reversed', '1', '(10:1:-1)', '1', '(:)'),
    ('zero-size', '1', '(::-1)', '1', '(1:0)'),
    ('element', '1', '(3)', '1', '(7)'),
    ('broadcast element', '1', '(1:9:2)', '1', '(4)'),
    ('broadcast scalar', '1', '(2:4)', 's', ''),
    ('scalar', 's', '', 's', ''),
    ('scalar from element', 's', '', '1', '(5)'),
    ('2-D whole', '2', '(:,:)', '2', '(:,:)'),
    ('2-D section', '2', '(1:3,2:3)', '2', '(2:4,1:2)'),
    ('2-D strided', '2', '(1:4:2,:)', '2', '(2:3,1:4)'),
    ('2-D negative', '2', '(3:1:-1,4:1:-3)', '2', '(1:3,1:2)'),
    ('2-D (::2)', '2', '(::2,4:1:-1)', '2', '(2:3,:)'),
    ('2-D column', '2', '(:,2)', '1', '(1:4)'),
    ('2-D row', '1', '(1:4)', '2', '(3,:)'),
    ('2-D broadcast', '2', '(2:3,2:3)', 's', ''),
    ('vector lhs', '1', '([9,2,5,3,10])', '1', '(1:5)'),
    ('vector rhs', '1', '(2:5)', '1', '([10,1,4,7])'),
    ('vector runs', '1', '([1,3,5,7,9])', '1', '([10,9,8,7,6])'),
    ('2-D vectors lhs', '2', '([4,1],[3,2,4])', '2', '(1:2,2:4)'),
    ('2-D vectors rhs', '2', '(1:2,2:4)', '2', '([4,1],[3,2,4])'),
]


def local_lhs_ok(side, sh):
    """gfortran 12 scatters a coindexed get into a local left-hand side
    with vector subscripts in two dimensions with the first dimension's
    indices alone (writing out of bounds, any library): not tested."""
    return not (sh[0] == '2-D vectors lhs' and 'get' in side)


def val(t, img, i):
    """Element i of image img's data: distinct per image and index."""
    if t[0] == 'i':
        return f"int(sg({i}) * ({img} * 10 + {i}), {t[1:]})"
    if t[0] == 'r':
        return f"real(sg({i}) * ({img} * 10 + {i} + 0.75d0), {t[1:]})"
    if t[0] == 'c':
        return f"cs({img}, {i})"
    return f"logical(mod({img} + {i}, 3) == 0, {t[1:]})"


def sentinel(t):
    return {'i': '99', 'r': '99', 'c': "'zzzzzzzzz'", 'l': '.true.'}[t[0]]


def same(t):
    return '.eqv.' if t[0] == 'l' else '=='


def common_head(w, mod, extra_decls):
    w(f"module {mod}")
    w("  implicit none")
    w("  integer, parameter :: ucs4 = selected_char_kind('ISO_10646')")
    extra_decls(w)
    w("contains")
    w("  integer function sg(i)")
    w("    integer, intent(in) :: i")
    w("    sg = merge(-1, 1, mod(i, 3) == 0)")
    w("  end function")
    w("  character(len=9) function cs(img, i)")
    w("    integer, intent(in) :: img, i")
    w("    cs = achar(64 + img) // achar(96 + i) // 'pqrstuv'")
    w("  end function")
    for t in TYPES:
        d = DECL[t]
        w(f"  subroutine fill_{t}(img, a1, a2, as)")
        w("    integer, intent(in) :: img")
        w(f"    {d} :: a1(10), a2(4,4), as")
        w("    integer :: i, j")
        w("    do i = 1, 10")
        w(f"      a1(i) = {val(t, 'img', 'i')}")
        w("    end do")
        w("    do j = 1, 4")
        w("      do i = 1, 4")
        w(f"        a2(i,j) = {val(t, 'img', '(j - 1) * 4 + i + 10')}")
        w("      end do")
        w("    end do")
        w(f"    as = {val(t, 'img', '27')}")
        w("  end subroutine")
        w(f"  subroutine blank_{t}(a1, a2, as)")
        w(f"    {d} :: a1(10), a2(4,4), as")
        w(f"    a1 = {sentinel(t)}; a2 = {sentinel(t)}; as = {sentinel(t)}")
        w("  end subroutine")
    w(f"end module {mod}")


def cases(groups, full_pairs, full_sides, ok):
    """(T, S, side, shape) list: every pair meets one side of each group
    (the sides of a group and the shapes taken in turn; ok(side, shape)
    says whether a side takes a shape), full_pairs go through every shape
    on full_sides."""
    out = []
    k = 0
    g_turn = [0] * len(groups)
    for (t, s) in PAIRS:
        for gi, group in enumerate(groups):
            side = group[g_turn[gi] % len(group)]
            g_turn[gi] += 1
            while True:
                sh = SHAPES[k % len(SHAPES)]
                k += 1
                if ok(side, sh):
                    break
            out.append((t, s, side, sh))
    for (t, s) in full_pairs:
        for side in full_sides:
            for sh in SHAPES:
                if ok(side, sh) and (t, s, side, sh) not in out:
                    out.append((t, s, side, sh))
    return out


def lit(text):
    """A Fortran character literal of any length, split with // &."""
    text = text.replace("'", "''")
    parts = [text[i:i + 60] for i in range(0, len(text), 60)] or ['']
    return " // &\n        ".join(f"'{p}'" for p in parts)


def stmt_lines(stmt):
    """A statement, continued when longer than 100 characters."""
    if len(stmt) <= 100:
        return stmt
    i = stmt.index(' = ')
    return stmt[:i + 2] + " &\n      " + stmt[i + 3:]


def short(t):
    return t.replace('_', ' len ').replace('c1', 'char').replace('c4', 'ucs4')


def emit_case(w, t, s, side, sh, stmt, chk, src_img, setup):
    nm, lr, ls, rr, rs = sh
    what = f"{side} {short(t)} = {short(s)}, {nm}: {stmt}"
    setup(w, t, s)
    w("  sync all")
    w(f"  {stmt_lines(stmt)}")
    w("  sync all")
    w(f"  call fill_{s}({src_img}, w1_{s}, w2_{s}, ws_{s})")
    w(f"  call blank_{t}(e1_{t}, e2_{t}, es_{t})")
    w(f"  e{lr}_{t}{ls} = w{rr}_{s}{rs}")
    w(f"  if (.not. all([{chk}] {same(t)} [e{lr}_{t}])) then")
    w(f"    write(buf, *) 'expected ', e{lr}_{t}, ' got ', {chk}")
    w(f"    call fail({lit(what + ': ')} // trim(buf))")
    w("  end if")


def program_tail(w, name):
    w("  sync all")
    w(f"  if (me == 1) print '(a)', 'PASS {name}'")
    w("contains")
    w("  subroutine fail(msg)")
    w("    character(len=*), intent(in) :: msg")
    w(f"    write(*, '(a,i0,a,a)') 'FAIL {name} image ', me, ': ', msg")
    w("    error stop 1")
    w("  end subroutine")
    w(f"end program {name}")


def prog_head(w, name, mod, more=()):
    w(f"program {name}")
    w(f"  use {mod}")
    w("  implicit none")
    w("  integer :: me, n, left, right, left2")
    for m in more:
        w(m)
    w("  character(len=4000) :: buf")
    w("  me = this_image()")
    w("  n = num_images()")
    w("  left = modulo(me - 2, n) + 1")
    w("  right = modulo(me, n) + 1")
    w("  left2 = modulo(me - 3, n) + 1")


def locals_decl(w, t):
    d = DECL[t]
    w(f"  {d} :: l1_{t}(10), l2_{t}(4,4), ls_{t}, v1_{t}(10), v2_{t}(4,4), vs_{t}")
    w(f"  {d} :: e1_{t}(10), e2_{t}(4,4), es_{t}, w1_{t}(10), w2_{t}(4,4), ws_{t}")


HEADER_NOTE = ("! Generated by caf_convert_gen.py (edit that, not this file):\n"
               "!   python3 tests/caf/caf_convert_gen.py tests/caf\n")

DOC_CONVERT = """\
! caf_convert.f90 -- coindexed assignment between every pair of types of
! one class, on coarrays (caf_send, caf_get, caf_sendget): integer(1,2,4,8)
! and real(4,8) in both directions (real -> integer truncates toward zero),
! character(len=3|7) of kind 1 and character(len=5) of kind 4 (blank
! padding, truncation, kind 1 <-> 4), logical(1,4).  Each pair is sent
! (d(..)[right] = v(..)), read (l(..) = c(..)[left]) and copied image to
! image (d(..)[right] = c(..)[left]) in a shape taken in turn from: whole
! arrays, sections, stride 2 on either side, (::2), open sections,
! negative strides, reversed, zero-size, elements, scalars, a scalar or an
! element broadcast to a section, 2-D sections (strided, negative, (::2)),
! a 2-D column or row against a 1-D section, vector subscripts (1-D,
! arithmetic ones, and 2-D on the remote side).  integer(4) = real(8),
! real(8) = integer(1) and character(kind=4, len=5) = character(len=7)
! go through every shape on every side.  Sources are allocatable coarrays, destinations static ones.
! Then a 4 MiB coarray: a strided send and a negative-stride get, each
! with a conversion (few operations: one bounce buffer, one strided call).
! The expected value is the same assignment done locally by gfortran.
!
! OpenCoarrays 2.10.1 fails it (run with the FAIL calls made non-fatal):
! on 1 image (osc pt2pt) 11 statements give wrong values -- integer =
! real of the same size and back (d1_i8(3)[j] = v1_r8(7), ls_r8 =
! cs_i8[k]: the bits are copied), a scalar broadcast to a section
! (d1_i4(2:4)[j] = vs_i4, even of one type), a scalar to a 2-D section
! image to image, a 2-D column from a 1-D section (l2_r4(:,2) =
! c1_i4(1:4)[k]), every 2-D vector subscript -- and d2_c1_3(1:2,2:4)[j] =
! v2_c4_5([4,1],[3,2,4]) aborts; on 2-4 images d2_i2([4,1],[3,2,4])[j] =
! v2_i8(1:2,2:4) fails in MPI_Put and ends the job.
!
! Prints "PASS caf_convert" on image 1; otherwise "FAIL caf_convert image
! <i>: <side, types, shape, statement>: expected ... got ..." and error
! stop 1.  Any image count.
"""

DOC_REF = """\
! caf_ref_convert.f90 -- coindexed assignment through components with
! every pair of types of one class (as caf_convert.f90: integer(1,2,4,8),
! real(4,8), character kinds 1 and 4 of three lengths, logical(1,4)):
! allocatable components of derived-type coarrays (od[j]%a1(..) = v(..),
! l(..) = oc[k]%a1(..), od[j]%a2(..) = oc[k]%a2(..): caf_send_by_ref,
! caf_get_by_ref, caf_sendget_by_ref), fixed-size components (the same
! through arrays without descriptor), allocatable left-hand sides
! (la(..) = c(..)[k]: get_by_ref) and a component across an array of
! derived type (pd(..)[j]%x: span != element size), in the shapes of
! caf_convert, each pair once per kind of statement, integer(4) =
! real(8) and character(len=3) = character(kind=4, len=5) in every shape.
! Then allocatable left-hand sides without subscripts, reallocated to the
! right-hand side's shape with a conversion (ra = c(1:9:2)[k],
! ra = oc[k]%a1(::4), a 2-D one).
! Fails on main before 831230b: a(::2) and a(::-1) of an allocatable
! component (a FULL reference with a stride) were read as a(:)
! ("shapes differ: 5 elements assigned to 10").
!
! Two gfortran 12 bugs are avoided (they break any coarray library):
! an allocatable scalar character component crashes the program at
! start-up, and pd(:)[j]%x passes the element's address, not the
! component's, so x is the first component.
!
! OpenCoarrays 2.10.1 fails it at its first fixed-component statement,
! od_i1[j]%f1(2:6) = v1_i1(1:10:2): "caf_send_by_ref(): extent out of
! range" on 1 and 4 images, a segfault on 2; on 3 the ALLOCATE of the
! components fails in MPI_Win_attach.
!
! Prints "PASS caf_ref_convert" on image 1; otherwise "FAIL
! caf_ref_convert image <i>: ..." and error stop 1.  Any image count.
"""


def gen_convert(path, doc):
    o = []
    w = o.append

    def decls(w):
        for t in TYPES:
            d = DECL[t]
            w(f"  {d} :: d1_{t}(10)[*], d2_{t}(4,4)[*], ds_{t}[*], cs_{t}[*]")
            w(f"  {d}, allocatable :: c1_{t}(:)[:], c2_{t}(:,:)[:]")
            locals_decl(w, t)
    common_head(w, 'caf_convert_data', decls)
    prog_head(w, 'caf_convert', 'caf_convert_data',
              ["  integer, parameter :: nbig = 2**19",
               "  real(8), allocatable :: bigr(:)[:]",
               "  integer(4), allocatable :: bigi(:)",
               "  integer :: i"])
    for t in TYPES:
        w(f"  allocate(c1_{t}(10)[*], c2_{t}(4,4)[*])")

    def setup(w, t, s):
        w(f"  call blank_{t}(d1_{t}, d2_{t}, ds_{t})")
        w(f"  call blank_{t}(l1_{t}, l2_{t}, ls_{t})")
        w(f"  call fill_{s}(me, c1_{s}, c2_{s}, cs_{s})")
        w(f"  call fill_{s}(me, v1_{s}, v2_{s}, vs_{s})")
    sides = ['send', 'get', 'image to image']
    cl = cases([[x] for x in sides], [('i4', 'r8'), ('r8', 'i1'), ('c4_5', 'c1_7')],
               sides, local_lhs_ok)
    for (t, s, side, sh) in cl:
        nm, lr, ls, rr, rs = sh
        csrc = f"c{rr}_{s}{rs}" if rr != 's' else f"cs_{s}"
        if side == 'send':
            stmt, chk, img = f"d{lr}_{t}{ls}[right] = v{rr}_{s}{rs}", f"d{lr}_{t}", 'left'
        elif side == 'get':
            stmt, chk, img = f"l{lr}_{t}{ls} = {csrc}[left]", f"l{lr}_{t}", 'left'
        else:
            stmt, chk, img = f"d{lr}_{t}{ls}[right] = {csrc}[left]", f"d{lr}_{t}", 'left2'
        emit_case(w, t, s, side, sh, stmt, chk, img, setup)
    # A few MiB through strided descriptors with a conversion, both ways.
    w("  ! 4 MiB coarray: strided send and negative-stride get with conversion")
    w("  allocate(bigr(nbig)[*], bigi(nbig))")
    w("  bigr = -1")
    w("  bigi = [(i + me, i = 1, nbig)]")
    w("  sync all")
    w("  bigr(1:nbig:2)[right] = bigi(nbig:1:-2)")
    w("  sync all")
    w("  if (any(bigr(1:nbig:2) /= [(real(nbig - 2 * i + 2 + left, 8), i = 1, nbig / 2)]) &")
    w("      .or. any(bigr(2:nbig:2) /= -1)) call fail('4 MiB strided send integer(4) -> real(8)')")
    w("  sync all")
    w("  bigi = 0")
    w("  bigi(nbig:1:-2) = bigr(1:nbig:2)[left]")
    w("  if (any(bigi(nbig:1:-2) /= [(nbig - 2 * i + 2 + left2, i = 1, nbig / 2)]) &")
    w("      .or. any(bigi(nbig-1:1:-2) /= 0)) call fail('4 MiB strided get real(8) -> integer(4)')")
    program_tail(w, 'caf_convert')
    open(path, 'w').write(doc + HEADER_NOTE + "\n".join(o) + "\n")
    return len(cl)


def gen_ref(path, doc):
    o = []
    w = o.append

    def decls(w):
        for t in TYPES:
            d = DECL[t]
            if t[0] == 'c':
                # gfortran 12 crashes at start-up (in the code it emits,
                # with any coarray library) on an allocatable scalar
                # character component: the scalar is a fixed component.
                w(f"  type tt_{t}")
                w(f"    {d}, allocatable :: a1(:), a2(:,:)")
                w(f"    {d} :: as, f1(10), f2(4,4), fs")
                w("  end type")
            else:
                w(f"  type tt_{t}")
                w(f"    {d}, allocatable :: a1(:), a2(:,:), as")
                w(f"    {d} :: f1(10), f2(4,4), fs")
                w("  end type")
            # x first: for pd(:)[j]%x gfortran 12 passes the address of
            # the element, not of the component (any library reads pad).
            w(f"  type sp_{t}")
            w(f"    {d} :: x")
            w("    integer(1) :: pad")
            w("    real(8) :: more(2)")
            w("  end type")
            w(f"  type(tt_{t}) :: od_{t}[*], oc_{t}[*]")
            w(f"  type(sp_{t}) :: pd_{t}(10)[*], pc_{t}(10)[*]")
            w(f"  {d} :: c1_{t}(10)[*], c2_{t}(4,4)[*], cs_{t}[*]")
            w(f"  {d}, allocatable :: la1_{t}(:), la2_{t}(:,:), las_{t}")
            locals_decl(w, t)
    common_head(w, 'caf_ref_convert_data', decls)
    prog_head(w, 'caf_ref_convert', 'caf_ref_convert_data',
              ["  integer(2), allocatable :: ra_i2(:), rx_i2(:)",
               "  real(8), allocatable :: ra_r8(:), rx_r8(:)",
               "  character(len=5,kind=ucs4), allocatable :: ra_c4_5(:), rx_c4_5(:)",
               "  integer(4), allocatable :: ra_i4_2(:,:), rx_i4_2(:,:)"])
    for t in TYPES:
        if t[0] == 'c':
            w(f"  allocate(od_{t}%a1(10), od_{t}%a2(4,4), oc_{t}%a1(10), oc_{t}%a2(4,4))")
        else:
            w(f"  allocate(od_{t}%a1(10), od_{t}%a2(4,4), od_{t}%as, oc_{t}%a1(10), "
              f"oc_{t}%a2(4,4), oc_{t}%as)")
        w(f"  allocate(la1_{t}(10), la2_{t}(4,4), las_{t})")
    comp = ['component send', 'component get', 'component image to image']
    fixed = ['fixed component send', 'fixed component get',
             'fixed component image to image']
    aot = ['array-of-type component send', 'array-of-type component get',
           'array-of-type component image to image']

    def ok(side, sh):
        if not local_lhs_ok(side, sh):
            return False
        if side.startswith('fixed'):
            # gfortran 12 has an internal compiler error on a 2-D vector
            # subscript of a fixed component (conv_expr_ref_to_caf_ref).
            return sh[1] != 's' and sh[3] != 's' and 'vectors' not in sh[0]
        if side.startswith('array-of-type'):
            return sh[1] == '1' and sh[3] in '1s'
        return True
    groups = [[comp[0]], [comp[1]], [comp[2]], fixed, ['allocatable lhs get'], aot]

    def setup(w, t, s):
        w(f"  call blank_{t}(od_{t}%a1, od_{t}%a2, od_{t}%as)")
        w(f"  call blank_{t}(od_{t}%f1, od_{t}%f2, od_{t}%fs)")
        w(f"  call blank_{t}(l1_{t}, l2_{t}, ls_{t})")
        w(f"  call blank_{t}(la1_{t}, la2_{t}, las_{t})")
        w(f"  call blank_{t}(l1_{t}, l2_{t}, ls_{t}); pd_{t}%x = l1_{t}")
        w(f"  call fill_{s}(me, oc_{s}%a1, oc_{s}%a2, oc_{s}%as)")
        w(f"  call fill_{s}(me, oc_{s}%f1, oc_{s}%f2, oc_{s}%fs)")
        w(f"  call fill_{s}(me, c1_{s}, c2_{s}, cs_{s}); pc_{s}%x = c1_{s}")
        w(f"  call fill_{s}(me, v1_{s}, v2_{s}, vs_{s})")
    cl = cases(groups, [('i4', 'r8'), ('c1_3', 'c4_5')], comp, ok)
    for (t, s, side, sh) in cl:
        nm, lr, ls, rr, rs = sh
        img = 'left'
        if side.startswith('array-of-type'):
            dst = f"pd_{t}{ls}[right]%x"
            src = f"pc_{s}{rs}[left]%x" if rr == '1' else f"cs_{s}[left]"
            loc, chk_d = f"l1_{t}{ls}", f"pd_{t}%x"
        else:
            a = 'f' if side.startswith('fixed') else 'a'
            dst = f"od_{t}[right]%{a}{lr}{ls}"
            src = f"oc_{s}[left]%{a}{rr}{rs}"
            loc, chk_d = f"l{lr}_{t}{ls}", f"od_{t}%{a}{lr}"
        if side.endswith('image to image'):
            stmt, chk, img = f"{dst} = {src}", chk_d, 'left2'
        elif side.endswith('send'):
            stmt, chk = f"{dst} = v{rr}_{s}{rs}", chk_d
        elif side == 'allocatable lhs get':
            csrc = f"c{rr}_{s}{rs}" if rr != 's' else f"cs_{s}"
            stmt, chk = f"la{lr}_{t}{ls} = {csrc}[left]", f"la{lr}_{t}"
        else:
            stmt, chk = f"{loc} = {src}", loc.split('(')[0]
        emit_case(w, t, s, side, sh, stmt, chk, img, setup)
    # Allocatable left-hand sides without subscripts: reallocated to the
    # shape of the right-hand side (10 elements -> 5, 4, 3; 1-D -> 2-D).
    realloc = [('i2', 'r8', "c1_r8(1:9:2)[left]", "w1_r8(1:9:2)"),
               ('r8', 'i1', "oc_i1[left]%a1(10:1:-3)", "w1_i1(10:1:-3)"),
               ('c4_5', 'c1_7', "oc_c1_7[left]%a1(::4)", "w1_c1_7(::4)"),
               ('i4', 'r4', "c2_r4(2:3,::2)[left]", "w2_r4(2:3,::2)")]
    for (t, s, rhs, loc) in realloc:
        two = 'c2_' in rhs
        ra, rx = (f"ra_{t}_2", f"rx_{t}_2") if two else (f"ra_{t}", f"rx_{t}")
        setup(w, t, s)
        w(f"  if (allocated({ra})) deallocate({ra})")
        w(f"  allocate({ra}{'(4,4)' if two else '(10)'})")
        w("  sync all")
        w(f"  {ra} = {rhs}")
        w(f"  call fill_{s}(left, w1_{s}, w2_{s}, ws_{s})")
        w(f"  {rx} = {loc}")
        what = f"reallocated lhs {short(t)} = {short(s)}: ra = {rhs}"
        w(f"  if (any(shape({ra}) /= shape({rx}))) then")
        w(f"    write(buf, *) 'expected shape ', shape({rx}), ' got ', shape({ra})")
        w(f"    call fail({lit(what + ': ')} // trim(buf))")
        w(f"  else if (.not. all([{ra}] {same(t)} [{rx}])) then")
        w(f"    write(buf, *) 'expected ', {rx}, ' got ', {ra}")
        w(f"    call fail({lit(what + ': ')} // trim(buf))")
        w("  end if")
        w("  sync all")
    program_tail(w, 'caf_ref_convert')
    open(path, 'w').write(doc + HEADER_NOTE + "\n".join(o) + "\n")
    return len(cl)


if __name__ == '__main__':
    out = sys.argv[1] if len(sys.argv) > 1 else '.'
    print('caf_convert:', gen_convert(f"{out}/caf_convert.f90", DOC_CONVERT),
          'statements')
    print('caf_ref_convert:', gen_ref(f"{out}/caf_ref_convert.f90", DOC_REF),
          'statements')
