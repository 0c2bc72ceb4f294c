//! The postfix programs of Breakpad's `STACK WIN` records, evaluated as Breakpad's
//! `PostfixEvaluator` evaluates them (32-bit values).
//!
//! A program is a list of tokens separated by whitespace (`$T0 .raSearch = $eip $T0 ^ =
//! $esp $T0 4 + =`):
//! - a token naming a variable (`$T0`, `$eip`, `.raSearch`, `.cbSavedRegs`) or a
//!   decimal number is pushed;
//! - `+ - * / %` pop two values and push the result (wrapping 32-bit arithmetic; division
//!   by zero fails), `@` aligns (`a b @` is `a & -b`);
//! - `^` pops an address and pushes the 32-bit word the stack memory holds there;
//! - `=` pops a value and then a variable whose name starts with `$`, and assigns it.
//!
//! Reading an undefined variable, a missing memory word, a malformed token or a stack
//! left non-empty at the end fails the whole program, as in Breakpad: the walker then
//! uses another strategy. Programs longer than [`MAX_TOKENS`] tokens, deeper than
//! [`MAX_DEPTH`] values or with more than [`MAX_VARIABLES`] variables are refused, so
//! evaluation is bounded whatever the `.sym` file says. A token `=` glued to the next one
//! (`=$ebp`, which some PDB-derived strings hold) is read as two tokens.

/// Most tokens one program may hold (msdia's longest are under 60).
pub const MAX_TOKENS: usize = 512;
/// Deepest the value stack may grow.
pub const MAX_DEPTH: usize = 64;
/// Most variables (given and assigned) one evaluation keeps.
pub const MAX_VARIABLES: usize = 64;

/// Why a program failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PostfixError {
    /// A variable read before it was given or assigned.
    Undefined,
    /// A word the program dereferences is not in the dump.
    MemoryMissing,
    /// An operator without enough operands, `=` to something not a `$` variable, a token
    /// that is neither a number nor a variable, division by zero, values left over.
    Malformed,
    /// Past [`MAX_TOKENS`], [`MAX_DEPTH`] or [`MAX_VARIABLES`].
    TooLarge,
}

impl std::fmt::Display for PostfixError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            PostfixError::Undefined => "the program reads an undefined variable",
            PostfixError::MemoryMissing => "the program reads memory the dump lacks",
            PostfixError::Malformed => "the program is malformed",
            PostfixError::TooLarge => "the program is too large",
        })
    }
}

/// The variables of one evaluation: given ones (the callee's registers, the frame's
/// sizes) and those the program assigns.
#[derive(Debug, Clone, Default)]
pub struct Variables<'a> {
    /// (name, value, assigned by the program)
    vars: Vec<(&'a str, u32, bool)>,
}

impl<'a> Variables<'a> {
    pub fn new() -> Self {
        Variables::default()
    }

    /// Gives `name` the value `v` before the program runs (not counted as assigned).
    pub fn set(&mut self, name: &'a str, v: u32) -> Result<(), PostfixError> {
        self.put(name, v, false)
    }

    fn put(&mut self, name: &'a str, v: u32, assigned: bool) -> Result<(), PostfixError> {
        if let Some(e) = self.vars.iter_mut().find(|(n, ..)| *n == name) {
            e.1 = v;
            e.2 |= assigned;
            return Ok(());
        }
        if self.vars.len() >= MAX_VARIABLES {
            return Err(PostfixError::TooLarge);
        }
        self.vars.push((name, v, assigned));
        Ok(())
    }

    /// The value of `name`, given or assigned.
    pub fn get(&self, name: &str) -> Option<u32> {
        self.vars.iter().find(|(n, ..)| *n == name).map(|e| e.1)
    }

    /// The value of `name` if the program assigned it.
    pub fn assigned(&self, name: &str) -> Option<u32> {
        self.vars
            .iter()
            .find(|(n, _, a)| *n == name && *a)
            .map(|e| e.1)
    }
}

/// One value on the stack: a number, or a variable not read yet (the target of `=`).
#[derive(Debug, Clone, Copy)]
enum Operand<'a> {
    Value(u32),
    Name(&'a str),
}

fn is_variable(tok: &str) -> bool {
    tok.starts_with('$') || tok.starts_with('.')
}

/// A decimal literal, optionally negative (wrapping to 32 bits).
fn number(tok: &str) -> Option<u32> {
    let (neg, digits) = match tok.strip_prefix('-') {
        Some(d) => (true, d),
        None => (false, tok),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let v = digits.parse::<u64>().ok()?;
    let v = u32::try_from(v).ok()?;
    Some(if neg { v.wrapping_neg() } else { v })
}

/// The program's tokens, `=` split from a token it is glued to the front of.
fn tokens(program: &str) -> impl Iterator<Item = &str> {
    program.split_ascii_whitespace().flat_map(|t| {
        let (a, b) = match t.strip_prefix('=') {
            Some(rest) if !rest.is_empty() => (&t[..1], Some(rest)),
            _ => (t, None),
        };
        std::iter::once(a).chain(b)
    })
}

/// Runs `program` over `vars`, reading stack words with `read`.
pub fn evaluate<'a>(
    program: &'a str,
    vars: &mut Variables<'a>,
    read: &mut dyn FnMut(u32) -> Option<u32>,
) -> Result<(), PostfixError> {
    let mut stack: Vec<Operand<'a>> = Vec::with_capacity(16);
    let value = |o: Operand<'a>, vars: &Variables<'a>| match o {
        Operand::Value(v) => Ok(v),
        Operand::Name(n) => vars.get(n).ok_or(PostfixError::Undefined),
    };
    for (i, tok) in tokens(program).enumerate() {
        if i >= MAX_TOKENS {
            return Err(PostfixError::TooLarge);
        }
        match tok {
            "+" | "-" | "*" | "/" | "%" | "@" => {
                let b = stack.pop().ok_or(PostfixError::Malformed)?;
                let a = stack.pop().ok_or(PostfixError::Malformed)?;
                let (a, b) = (value(a, vars)?, value(b, vars)?);
                let r = match tok {
                    "+" => a.wrapping_add(b),
                    "-" => a.wrapping_sub(b),
                    "*" => a.wrapping_mul(b),
                    "/" => a.checked_div(b).ok_or(PostfixError::Malformed)?,
                    "%" => a.checked_rem(b).ok_or(PostfixError::Malformed)?,
                    _ => a & b.wrapping_neg(),
                };
                stack.push(Operand::Value(r));
            }
            "^" => {
                let a = stack.pop().ok_or(PostfixError::Malformed)?;
                let a = value(a, vars)?;
                let v = read(a).ok_or(PostfixError::MemoryMissing)?;
                stack.push(Operand::Value(v));
            }
            "=" => {
                let v = stack.pop().ok_or(PostfixError::Malformed)?;
                let v = value(v, vars)?;
                match stack.pop() {
                    Some(Operand::Name(n)) if n.starts_with('$') => vars.put(n, v, true)?,
                    _ => return Err(PostfixError::Malformed),
                }
            }
            t if is_variable(t) => stack.push(Operand::Name(t)),
            t => stack.push(Operand::Value(number(t).ok_or(PostfixError::Malformed)?)),
        }
        if stack.len() > MAX_DEPTH {
            return Err(PostfixError::TooLarge);
        }
    }
    if stack.is_empty() {
        Ok(())
    } else {
        Err(PostfixError::Malformed)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn stack_at(base: u32, words: &[u32]) -> impl FnMut(u32) -> Option<u32> + '_ {
        move |a| {
            let off = a.checked_sub(base)?;
            if off % 4 != 0 {
                return None;
            }
            words.get(usize::try_from(off / 4).ok()?).copied()
        }
    }

    #[test]
    fn frame_data_program_of_breakpads_documentation() {
        // Breakpad's symbol_files.md, "STACK WIN records": an ebp-based frame
        let program = "$T0 $ebp = $eip $T0 4 + ^ = $ebp $T0 ^ = $esp $T0 8 + = \
                       $L $T0 .cbSavedRegs - = $P $T0 8 + .cbParams + =";
        let mut vars = Variables::new();
        vars.set("$ebp", 0x1010).unwrap();
        vars.set("$esp", 0x1000).unwrap();
        vars.set(".cbSavedRegs", 8).unwrap();
        vars.set(".cbParams", 12).unwrap();
        let words = [0, 0, 0, 0, 0x1040, 0x40_1234];
        evaluate(program, &mut vars, &mut stack_at(0x1000, &words)).unwrap();
        assert_eq!(vars.assigned("$eip"), Some(0x40_1234));
        assert_eq!(vars.assigned("$ebp"), Some(0x1040));
        assert_eq!(vars.assigned("$esp"), Some(0x1018));
        assert_eq!(vars.assigned("$L"), Some(0x1008));
        assert_eq!(vars.assigned("$P"), Some(0x1018 + 12));
        assert_eq!(vars.assigned("$T0"), Some(0x1010));
        assert_eq!(vars.assigned("$ebx"), None);
    }

    #[test]
    fn align_glued_assignment_and_negative_literals() {
        let mut vars = Variables::new();
        vars.set("$ebp", 0x1017).unwrap();
        evaluate("$T1 $ebp 8 @ = $T2 $T1 -4 + =$T3 3", &mut vars, &mut |_| {
            None
        })
        .expect_err("a value left on the stack");
        let mut vars = Variables::new();
        vars.set("$ebp", 0x1017).unwrap();
        evaluate("$T1 $ebp 8 @ = $T2 $T1 -4 + =", &mut vars, &mut |_| None).unwrap();
        assert_eq!(vars.assigned("$T1"), Some(0x1010));
        assert_eq!(vars.assigned("$T2"), Some(0x100c));
        let mut vars = Variables::new();
        evaluate("$T0 5 =$eip $T0 2 * =", &mut vars, &mut |_| None).unwrap();
        assert_eq!(vars.assigned("$eip"), Some(10));
    }

    #[test]
    fn failures_are_errors_not_guesses() {
        let run = |p: &str| {
            let mut vars = Variables::new();
            vars.set(".cbParams", 4).unwrap();
            evaluate(p, &mut vars, &mut |_| None)
        };
        assert_eq!(run("$eip $T0 ="), Err(PostfixError::Undefined));
        assert_eq!(run("$eip 4 ^ ="), Err(PostfixError::MemoryMissing));
        assert_eq!(run("$eip +"), Err(PostfixError::Malformed));
        assert_eq!(run(".cbParams 4 ="), Err(PostfixError::Malformed));
        assert_eq!(run("$eip 4 0 / ="), Err(PostfixError::Malformed));
        assert_eq!(run("$eip 0x10 ="), Err(PostfixError::Malformed));
        assert_eq!(run("$eip 99999999999 ="), Err(PostfixError::Malformed));
        assert_eq!(run(&"1 ".repeat(100)), Err(PostfixError::TooLarge));
        assert_eq!(
            run(&format!("$eip 1 {}=", "1 + ".repeat(300))),
            Err(PostfixError::TooLarge)
        );
        assert_eq!(run(&format!("$eip 1 {}=", "1 + ".repeat(200))), Ok(()));
        let many: String = (0..100).map(|i| format!("$v{i} 1 = ")).collect();
        assert_eq!(run(&many), Err(PostfixError::TooLarge));
        assert_eq!(run(""), Ok(()));
    }
}
