//! A synthetic ELF core writer for tests: literal bytes, laid out by hand.
//!
//! It shares no structs or constants with the reader (docs/style.md 2.9), so a layout mistake
//! cannot hide on both sides: offsets here are written from the kernel's structure
//! definitions, not from `parse.rs` or `notes.rs`.

/// One note to write.
pub struct SNote {
    pub name: &'static str,
    pub n_type: u32,
    pub desc: Vec<u8>,
}

/// One PT_LOAD to write.
pub struct SLoad {
    pub vaddr: u64,
    pub flags: u32,
    pub data: Vec<u8>,
    /// Memory size (≥ data length).
    pub memsz: u64,
}

/// A core file under construction.
pub struct SCore {
    pub machine: u16,
    pub e_type: u16,
    pub notes: Vec<SNote>,
    pub loads: Vec<SLoad>,
}

fn put16(v: &mut Vec<u8>, x: u16) {
    v.extend_from_slice(&x.to_le_bytes());
}
fn put32(v: &mut Vec<u8>, x: u32) {
    v.extend_from_slice(&x.to_le_bytes());
}
fn put64(v: &mut Vec<u8>, x: u64) {
    v.extend_from_slice(&x.to_le_bytes());
}
fn pad4(v: &mut Vec<u8>) {
    while !v.len().is_multiple_of(4) {
        v.push(0);
    }
}

/// Encodes notes with 4-byte padding.
pub fn encode_notes(notes: &[SNote]) -> Vec<u8> {
    let mut v = Vec::new();
    for n in notes {
        let name_len = if n.name.is_empty() {
            0
        } else {
            n.name.len() + 1
        };
        put32(&mut v, name_len as u32);
        put32(&mut v, n.desc.len() as u32);
        put32(&mut v, n.n_type);
        v.extend_from_slice(n.name.as_bytes());
        if name_len > 0 {
            v.push(0);
        }
        pad4(&mut v);
        v.extend_from_slice(&n.desc);
        pad4(&mut v);
    }
    v
}

/// A 56-byte ELF64 program header.
pub fn phdr(p_type: u32, flags: u32, offset: u64, vaddr: u64, filesz: u64, memsz: u64) -> Vec<u8> {
    let mut v = Vec::new();
    put32(&mut v, p_type);
    put32(&mut v, flags);
    put64(&mut v, offset);
    put64(&mut v, vaddr);
    put64(&mut v, vaddr); // paddr
    put64(&mut v, filesz);
    put64(&mut v, memsz);
    put64(&mut v, 0x1000);
    v
}

/// A 64-byte ELF64 little-endian header.
pub fn ehdr(e_type: u16, machine: u16, phoff: u64, phnum: u16, entry: u64) -> Vec<u8> {
    let mut v = b"\x7fELF\x02\x01\x01".to_vec();
    v.resize(16, 0);
    put16(&mut v, e_type);
    put16(&mut v, machine);
    put32(&mut v, 1);
    put64(&mut v, entry);
    put64(&mut v, phoff);
    put64(&mut v, 0); // shoff
    put32(&mut v, 0); // flags
    put16(&mut v, 64);
    put16(&mut v, 56);
    put16(&mut v, phnum);
    put16(&mut v, 64);
    put16(&mut v, 0);
    put16(&mut v, 0);
    v
}

impl SCore {
    pub fn new(machine: u16) -> Self {
        SCore {
            machine,
            e_type: 4,
            notes: Vec::new(),
            loads: Vec::new(),
        }
    }
    pub fn note(mut self, name: &'static str, n_type: u32, desc: Vec<u8>) -> Self {
        self.notes.push(SNote { name, n_type, desc });
        self
    }
    pub fn load(mut self, vaddr: u64, flags: u32, data: Vec<u8>) -> Self {
        let memsz = data.len() as u64;
        self.loads.push(SLoad {
            vaddr,
            flags,
            data,
            memsz,
        });
        self
    }
    /// A PT_LOAD with no bytes in the file (as the kernel writes for unread text).
    pub fn empty_load(mut self, vaddr: u64, flags: u32, memsz: u64) -> Self {
        self.loads.push(SLoad {
            vaddr,
            flags,
            data: Vec::new(),
            memsz,
        });
        self
    }
    /// Lays out: header, program headers (PT_NOTE first), notes, segment data.
    pub fn build(&self) -> Vec<u8> {
        let phnum = 1 + self.loads.len();
        let notes = encode_notes(&self.notes);
        let notes_off = 64 + 56 * phnum as u64;
        let mut data_off = notes_off + notes.len() as u64;
        let mut out = ehdr(self.e_type, self.machine, 64, phnum as u16, 0);
        out.extend(phdr(4, 0, notes_off, 0, notes.len() as u64, 0));
        for l in &self.loads {
            out.extend(phdr(
                1,
                l.flags,
                data_off,
                l.vaddr,
                l.data.len() as u64,
                l.memsz,
            ));
            data_off += l.data.len() as u64;
        }
        out.extend(notes);
        for l in &self.loads {
            out.extend_from_slice(&l.data);
        }
        out
    }
}

/// x86_64 `struct elf_prstatus` (336 bytes): `regs` in `user_regs_struct` order.
pub fn prstatus_x86_64(tid: u32, cursig: u16, regs: &[u64; 27]) -> Vec<u8> {
    let mut v = vec![0u8; 336];
    v[12..14].copy_from_slice(&cursig.to_le_bytes());
    v[32..36].copy_from_slice(&tid.to_le_bytes());
    for (i, r) in regs.iter().enumerate() {
        v[112 + 8 * i..120 + 8 * i].copy_from_slice(&r.to_le_bytes());
    }
    v
}

/// aarch64 `struct elf_prstatus` (392 bytes): x0..x30, sp, pc, pstate.
pub fn prstatus_aarch64(tid: u32, cursig: u16, regs: &[u64; 34]) -> Vec<u8> {
    let mut v = vec![0u8; 392];
    v[12..14].copy_from_slice(&cursig.to_le_bytes());
    v[32..36].copy_from_slice(&tid.to_le_bytes());
    for (i, r) in regs.iter().enumerate() {
        v[112 + 8 * i..120 + 8 * i].copy_from_slice(&r.to_le_bytes());
    }
    v
}

/// 64-bit `struct elf_prpsinfo` (136 bytes).
pub fn prpsinfo(pid: u32, fname: &str, psargs: &str) -> Vec<u8> {
    let mut v = vec![0u8; 136];
    v[24..28].copy_from_slice(&pid.to_le_bytes());
    v[40..40 + fname.len()].copy_from_slice(fname.as_bytes());
    v[56..56 + psargs.len()].copy_from_slice(psargs.as_bytes());
    v
}

/// `siginfo_t` (128 bytes) with a fault address.
pub fn siginfo(signo: i32, code: i32, addr: u64) -> Vec<u8> {
    let mut v = vec![0u8; 128];
    v[0..4].copy_from_slice(&signo.to_le_bytes());
    v[8..12].copy_from_slice(&code.to_le_bytes());
    v[16..24].copy_from_slice(&addr.to_le_bytes());
    v
}

/// NT_AUXV from (type, value) pairs; AT_NULL is appended.
pub fn auxv(pairs: &[(u64, u64)]) -> Vec<u8> {
    let mut v = Vec::new();
    for &(k, x) in pairs.iter().chain(&[(0, 0)]) {
        put64(&mut v, k);
        put64(&mut v, x);
    }
    v
}

/// NT_FILE from (start, end, page offset, path).
pub fn nt_file(page_size: u64, entries: &[(u64, u64, u64, &str)]) -> Vec<u8> {
    let mut v = Vec::new();
    put64(&mut v, entries.len() as u64);
    put64(&mut v, page_size);
    for &(s, e, o, _) in entries {
        put64(&mut v, s);
        put64(&mut v, e);
        put64(&mut v, o);
    }
    for &(_, _, _, p) in entries {
        v.extend_from_slice(p.as_bytes());
        v.push(0);
    }
    v
}

/// The first page of a shared object as it sits in memory: ELF header, two PT_LOADs (text
/// r-x at 0 covering `text_size`, data rw- after it), a PT_NOTE with the GNU build-id.
pub fn elf_image(build_id: &[u8], text_size: u64, data_size: u64) -> Vec<u8> {
    let note = encode_notes(&[SNote {
        name: "GNU",
        n_type: 3,
        desc: build_id.to_vec(),
    }]);
    let note_off = 64 + 3 * 56;
    let mut v = ehdr(3, 62, 64, 3, 0x100);
    v.extend(phdr(1, 5, 0, 0, text_size, text_size));
    v.extend(phdr(1, 6, text_size, text_size, data_size, data_size));
    v.extend(phdr(
        4,
        4,
        note_off,
        note_off,
        note.len() as u64,
        note.len() as u64,
    ));
    v.extend(note);
    v.resize(0x1000, 0);
    v
}
