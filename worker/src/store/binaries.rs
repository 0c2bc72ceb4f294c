//! The `binaries` table: uploaded binaries, debug files and Breakpad `.sym` files, indexed
//! by build-id and by debug-id.
//!
//! First upload wins: a file holds its identity (build-id, debug-id, or a Windows image's
//! code id and name) in its role ([`BinaryRow::role`]) once stored, and a different file
//! claiming the same identity in the same role is refused ([`holder_of`]), so a doctored
//! upload cannot replace the file crashes are symbolized with. The database enforces it:
//! a file [`claim`]s its identity in a table whose key admits one file per identity and
//! role, so of two different files stored at the same moment one is refused.
//!
//! Files belong to projects (issue 41, migration 0025): a file's bytes are one row and one
//! blob, and `binary_projects` names the projects holding it, with [`SHARED`] for the
//! files every project sees (marked so by an admin, or fetched from a remote source).
//! First upload wins within a project: claims are keyed by project too, so a project's
//! file never stands in for another's. A lookup for a project sees [`visible`] files
//! only: its own, then the shared ones its own do not contest.

use std::collections::HashMap;

use super::{Db, StoreError};

/// The holder of the files every project sees. No project is named so
/// (`projects::valid_name`).
pub const SHARED: &str = "*";

/// Whose files a lookup sees.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sees<'a> {
    /// Every stored file (a server-wide caller that named no project).
    Every,
    /// A project's own files, and the shared ones (see [`visible`]).
    Project(&'a str),
}

/// One stored binary file.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct BinaryRow {
    pub sha256: String,
    /// Lower-case hex; empty for a file without one (see [`BinaryRow::build_id`]).
    pub build_id: String,
    pub arch: Option<String>,
    pub kind: String,
    pub file_name: Option<String>,
    pub size: i64,
    /// Comma-separated section names (see [`BinaryRow::section_list`]).
    pub sections: String,
    pub uploaded_at: i64,
    /// Breakpad debug-id, upper-case (`.sym` and Mach-O files).
    pub debug_id: Option<String>,
    /// `elf`, `macho`, `pe` or `breakpad`.
    pub format: String,
    /// The remote source (a debuginfod server's URL) the file was fetched from; `None`
    /// for an upload.
    pub source: Option<String>,
    /// A Windows image's code id, upper-case (`TimeDateStamp` + `SizeOfImage`); for a
    /// Windows `.sym` file, that of the image it describes.
    pub code_id: Option<String>,
    /// For a Windows `.sym` file, the name of the image it describes (its `INFO CODE_ID`
    /// record): with `code_id`, what a module without a CodeView record is matched by.
    pub code_file: Option<String>,
}

impl BinaryRow {
    /// The sections as a list.
    pub fn section_list(&self) -> Vec<&str> {
        self.sections.split(',').filter(|s| !s.is_empty()).collect()
    }

    /// The build-id, if the file has one.
    pub fn build_id(&self) -> Option<&str> {
        Some(self.build_id.as_str()).filter(|s| !s.is_empty())
    }

    /// Whether this is a Breakpad `.sym` file (not a binary).
    pub fn is_breakpad(&self) -> bool {
        self.kind == engine::identify::KIND_BREAKPAD
    }

    /// What the file is to the module it describes. Files of different roles legitimately
    /// share an identity and arrive in any order: a stripped binary (`binary`, as
    /// `strip -s` leaves it), one stripped of its debug information only (`symtab`, as
    /// `strip --strip-debug` leaves it: code and symbol table), its separate debug file
    /// (`debug-file`), the unstripped build (`unstripped`), all of one build-id; a PDB
    /// (`pdb`) and the `.sym` file (`sym`) of one debug-id; a Windows image (`image`)
    /// names its PDB's debug-id too. Within one role, one file per identity.
    pub fn role(&self) -> &'static str {
        let sections = self.section_list();
        match self.format.as_str() {
            "breakpad" => "sym",
            "pdb" => "pdb",
            "pe" => "image",
            _ if self.kind == "debug" => "debug-file",
            _ if sections.contains(&"debug_info") => "unstripped",
            _ if sections.contains(&"symtab") => "symtab",
            _ => "binary",
        }
    }

    /// The identity this file holds in its role: the debug-id of a `.sym` file or PDB (a
    /// `.sym` file whose debug-id is zeros: the code id and name of the image it
    /// describes), a Windows image's code id and file name (without case, as Windows names files), an
    /// ELF or Mach-O file's build-id. `None` for a file without one (never stored).
    fn identity(&self) -> Option<String> {
        // a debug-id of zeros is no identity: dump_syms writes one for an image without a
        // CodeView record (wine's DLLs), whose `.sym` file is known by the image instead
        let debug_id = self
            .debug_id
            .clone()
            .filter(|d| d.chars().any(|c| c != '0'));
        match self.format.as_str() {
            "breakpad" => debug_id.or_else(|| {
                Some(format!(
                    "{}/{}",
                    self.code_id.as_deref()?,
                    self.code_file.as_deref()?.to_ascii_lowercase()
                ))
            }),
            "pdb" => debug_id,
            "pe" => Some(format!(
                "{}/{}",
                self.code_id.as_deref()?,
                self.file_name.as_deref()?.to_ascii_lowercase()
            )),
            _ => self.build_id().map(str::to_string),
        }
    }

    /// Whether `other` is a different file claiming this file's identity in its role.
    pub fn contests(&self, other: &BinaryRow) -> bool {
        self.sha256 != other.sha256
            && self.format == other.format
            && self.role() == other.role()
            && self.identity().is_some()
            && self.identity() == other.identity()
    }
}

const COLUMNS: &str =
    "sha256, build_id, arch, kind, file_name, size, sections, uploaded_at, debug_id, format, source, \
     code_id, code_file";

/// Inserts `row` unless a binary with the same sha256 exists. Returns the stored row
/// and whether it was created by this call.
pub async fn insert(db: &Db, row: &BinaryRow) -> Result<(BinaryRow, bool), StoreError> {
    let sql = format!(
        "INSERT INTO binaries ({COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13) \
         ON CONFLICT (sha256) DO NOTHING"
    );
    let done = crate::on_pool!(db, p => sqlx::query(sqlx::AssertSqlSafe(sql.as_str()))
        .bind(&row.sha256)
        .bind(&row.build_id)
        .bind(&row.arch)
        .bind(&row.kind)
        .bind(&row.file_name)
        .bind(row.size)
        .bind(&row.sections)
        .bind(row.uploaded_at)
        .bind(&row.debug_id)
        .bind(&row.format)
        .bind(&row.source)
        .bind(&row.code_id)
        .bind(&row.code_file)
        .execute(p)
        .await
        .map(|r| r.rows_affected()))?;
    let stored = by_sha256(db, &row.sha256)
        .await?
        .ok_or_else(|| StoreError::Corrupt(format!("binary {} vanished", row.sha256)))?;
    Ok((stored, done == 1))
}

/// The file of `project` (or [`SHARED`]) that already holds `row`'s identity in `row`'s
/// role, when it is a different file (first upload wins within a project; see
/// [`BinaryRow::role`]). Another project's files never contest it.
pub async fn holder_of(
    db: &Db,
    row: &BinaryRow,
    project: &str,
) -> Result<Option<BinaryRow>, StoreError> {
    let rows = match (row.format.as_str(), &row.debug_id, &row.code_id) {
        ("breakpad" | "pdb", Some(d), _) => by_debug_id(db, d).await?,
        // an image holds its code id under each of its names
        ("pe", _, Some(c)) => match &row.file_name {
            Some(name) => {
                let images = by_code_id(db, name, c, Sees::Every).await?;
                let images = held_by(db, project, images).await?;
                return Ok(images.into_iter().find(|r| r.sha256 != row.sha256));
            }
            None => Vec::new(),
        },
        _ => match row.build_id() {
            Some(b) => by_build_id(db, b).await?,
            None => Vec::new(),
        },
    };
    let rows = held_by(db, project, rows).await?;
    Ok(rows.into_iter().find(|r| r.contests(row)))
}

/// Of `rows`, those `project` (or [`SHARED`]) holds itself.
async fn held_by(
    db: &Db,
    project: &str,
    rows: Vec<BinaryRow>,
) -> Result<Vec<BinaryRow>, StoreError> {
    let holders = holders(db, &rows).await?;
    Ok(rows
        .into_iter()
        .filter(|r| holds(&holders, r, project))
        .collect())
}

/// Records that `project` (or [`SHARED`]) holds the file `sha256`, used now (its
/// retention counts from its upload: migration 0027); whether it is new to it.
pub async fn own(db: &Db, sha256: &str, project: &str) -> Result<bool, StoreError> {
    let sql = "INSERT INTO binary_projects (sha256, project, last_used_at) VALUES ($1, $2, $3) \
               ON CONFLICT DO NOTHING";
    let done = crate::on_pool!(db, p => sqlx::query(sql)
        .bind(sha256)
        .bind(project)
        .bind(super::now_ms())
        .execute(p)
        .await
        .map(|r| r.rows_affected()))?;
    Ok(done == 1)
}

/// How stale a hold's recorded last use may grow before a crash processed with its file
/// writes it again (half an hour, in ms; with a worker's own note of its writes,
/// `jobs::recent_use`, the recorded use is less than an hour older than the real one).
/// The retention of symbol files counts whole days (`store::retention`), so a last use
/// known to the hour is enough, and a hot file's hold is written twice an hour instead
/// of once per crash: each write is a commit, and on SQLite a wait for the single writer
/// behind the workers' claims and stores (issue 40).
pub const USE_RECORDED_EVERY_MS: i64 = 30 * 60 * 1000;

/// Records that `project`'s crash was processed with the files `sha256s` at `at` (Unix
/// ms): the retention of symbol files (`store::retention`) keeps what a project's
/// crashes still use. Only `project`'s own holds are touched (a shared file is kept by
/// being shared), and only those whose last use is older than
/// [`USE_RECORDED_EVERY_MS`] before `at`.
pub async fn record_use(
    db: &Db,
    project: &str,
    sha256s: &[&str],
    at: i64,
) -> Result<(), StoreError> {
    if sha256s.is_empty() {
        return Ok(());
    }
    let list = serde_json::to_string(sha256s).map_err(|e| StoreError::Corrupt(e.to_string()))?;
    let sql = format!(
        "UPDATE binary_projects SET last_used_at = $2 WHERE project = $1 \
         AND last_used_at < $4 AND sha256 IN ({})",
        db.json_strings("$3")
    );
    let _turn = db.write_turn().await;
    crate::on_pool!(db, p => sqlx::query(sqlx::AssertSqlSafe(sql.as_str()))
        .bind(project)
        .bind(at)
        .bind(&list)
        .bind(at.saturating_sub(USE_RECORDED_EVERY_MS))
        .execute(p)
        .await
        .map(|_| ()))?;
    Ok(())
}

/// Records that `project` (or [`SHARED`]) no longer holds the file `sha256`; whether it
/// held it. The bytes stay (another project may hold them).
pub async fn disown(db: &Db, sha256: &str, project: &str) -> Result<bool, StoreError> {
    let sql = "DELETE FROM binary_projects WHERE sha256 = $1 AND project = $2";
    let done = crate::on_pool!(db, p => sqlx::query(sql)
        .bind(sha256)
        .bind(project)
        .execute(p)
        .await
        .map(|r| r.rows_affected()))?;
    Ok(done == 1)
}

/// The holders of each of `rows`' files (projects, and [`SHARED`]), in one query.
async fn holders(db: &Db, rows: &[BinaryRow]) -> Result<HashMap<String, Vec<String>>, StoreError> {
    let mut out: HashMap<String, Vec<String>> = HashMap::new();
    if rows.is_empty() {
        return Ok(out);
    }
    let shas: Vec<&str> = rows.iter().map(|r| r.sha256.as_str()).collect();
    let list = serde_json::to_string(&shas).map_err(|e| StoreError::Corrupt(e.to_string()))?;
    let sql = format!(
        "SELECT sha256, project FROM binary_projects WHERE sha256 IN ({})",
        db.json_strings("$1")
    );
    let found: Vec<(String, String)> = crate::on_pool!(db, p => sqlx::query_as(
        sqlx::AssertSqlSafe(sql.as_str()))
        .bind(&list)
        .fetch_all(p)
        .await)?;
    for (sha, project) in found {
        out.entry(sha).or_default().push(project);
    }
    Ok(out)
}

/// Whether `holders` lists `project` as holding `row`'s file.
fn holds(holders: &HashMap<String, Vec<String>>, row: &BinaryRow, project: &str) -> bool {
    holders
        .get(&row.sha256)
        .is_some_and(|h| h.iter().any(|p| p == project))
}

/// Of `rows` (in their order), the files `sees` sees: every file, or a project's own and
/// the shared files that neither one of its own nor an earlier shared file contests (a
/// project's own file of an identity wins over a shared one; the first shared one over
/// later ones). Another project's file is left out as if it were not stored.
pub async fn visible(
    db: &Db,
    sees: Sees<'_>,
    rows: Vec<BinaryRow>,
) -> Result<Vec<BinaryRow>, StoreError> {
    let Sees::Project(project) = sees else {
        return Ok(rows);
    };
    let holders = holders(db, &rows).await?;
    Ok(pick_visible(&holders, project, rows))
}

/// [`visible`] of each list of `groups` (a job's files by build-id), in one query.
pub async fn visible_each(
    db: &Db,
    sees: Sees<'_>,
    groups: HashMap<String, Vec<BinaryRow>>,
) -> Result<HashMap<String, Vec<BinaryRow>>, StoreError> {
    let Sees::Project(project) = sees else {
        return Ok(groups);
    };
    let all: Vec<BinaryRow> = groups.values().flatten().cloned().collect();
    let holders = holders(db, &all).await?;
    Ok(groups
        .into_iter()
        .map(|(id, rows)| (id, pick_visible(&holders, project, rows)))
        .collect())
}

/// [`by_build_ids`] then [`visible_each`], in one query: every file of `build_ids` with
/// its holders, one row per file and holder (a job's lookup of its dump's modules: one
/// round trip, not two, issue 40). Every build-id asked is a key of the answer.
pub async fn visible_by_build_ids(
    db: &Db,
    sees: Sees<'_>,
    build_ids: &[&str],
) -> Result<HashMap<String, Vec<BinaryRow>>, StoreError> {
    let Sees::Project(project) = sees else {
        return by_build_ids(db, build_ids).await;
    };
    let mut files = no_files(build_ids);
    if build_ids.is_empty() {
        return Ok(files);
    }
    let list = serde_json::to_string(build_ids).map_err(|e| StoreError::Corrupt(e.to_string()))?;
    let columns: Vec<String> = COLUMNS
        .split(',')
        .map(|c| format!("b.{}", c.trim()))
        .collect();
    // ordered by file, so a file's rows (one per holder) follow each other
    let sql = format!(
        "SELECT {}, h.project AS holder FROM binaries b \
         LEFT JOIN binary_projects h ON h.sha256 = b.sha256 \
         WHERE b.build_id IN ({}) ORDER BY b.uploaded_at, b.sha256",
        columns.join(", "),
        db.json_strings("$1")
    );
    #[derive(sqlx::FromRow)]
    struct Held {
        #[sqlx(flatten)]
        row: BinaryRow,
        holder: Option<String>,
    }
    let found: Vec<Held> = crate::on_pool!(db, p => sqlx::query_as::<_, Held>(
        sqlx::AssertSqlSafe(sql.as_str()))
        .bind(&list)
        .fetch_all(p)
        .await)?;
    let mut holders: HashMap<String, Vec<String>> = HashMap::new();
    let mut rows: Vec<BinaryRow> = Vec::new();
    for Held { row, holder } in found {
        if let Some(holder) = holder {
            holders.entry(row.sha256.clone()).or_default().push(holder);
        }
        if rows.last().is_none_or(|last| last.sha256 != row.sha256) {
            rows.push(row);
        }
    }
    for row in rows {
        if let Some(same) = files.get_mut(&row.build_id) {
            same.push(row);
        }
    }
    Ok(files
        .into_iter()
        .map(|(id, rows)| (id, pick_visible(&holders, project, rows)))
        .collect())
}

/// [`visible`]'s rule, given each file's holders.
fn pick_visible(
    holders: &HashMap<String, Vec<String>>,
    project: &str,
    rows: Vec<BinaryRow>,
) -> Vec<BinaryRow> {
    let own: Vec<&BinaryRow> = rows.iter().filter(|r| holds(holders, r, project)).collect();
    let mut out: Vec<BinaryRow> = Vec::new();
    for r in &rows {
        let take = holds(holders, r, project)
            || (holds(holders, r, SHARED)
                && !own.iter().any(|o| o.contests(r))
                && !out.iter().any(|o| o.contests(r)));
        if take {
            out.push(r.clone());
        }
    }
    out
}

/// Whether `sees` sees the stored file `sha256` at all (its own or a shared file).
pub async fn is_visible(db: &Db, sees: Sees<'_>, sha256: &str) -> Result<bool, StoreError> {
    let Some(row) = by_sha256(db, sha256).await? else {
        return Ok(false);
    };
    Ok(!visible(db, sees, vec![row]).await?.is_empty())
}

/// The outcome of [`claim`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Claim {
    /// The file holds its identity in its role: `new` if this call made the claim (undo
    /// it with [`release`] if the file is then not stored).
    Held { new: bool },
    /// The file has no identity to claim (never contested).
    Nothing,
    /// Another file (this sha256) holds the identity in this role.
    Lost(String),
}

/// Claims `row`'s identity in its format and role for `row`'s file in `project` (or
/// [`SHARED`]; migrations 0018 and 0025): of two different files claiming one identity
/// in one project, even at the same moment, one wins. Files stored before the claims existed hold none; [`holder_of`] finds them.
pub async fn claim(db: &Db, row: &BinaryRow, project: &str) -> Result<Claim, StoreError> {
    let Some(identity) = row.identity() else {
        return Ok(Claim::Nothing);
    };
    let insert = "INSERT INTO binary_claims (format, role, identity, sha256, project) \
                  VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING";
    let done = crate::on_pool!(db, p => sqlx::query(insert)
        .bind(&row.format)
        .bind(row.role())
        .bind(&identity)
        .bind(&row.sha256)
        .bind(project)
        .execute(p)
        .await
        .map(|r| r.rows_affected()))?;
    if done == 1 {
        return Ok(Claim::Held { new: true });
    }
    let select = "SELECT sha256 FROM binary_claims \
                  WHERE format = $1 AND role = $2 AND identity = $3 AND project = $4";
    let holder: Option<(String,)> = crate::on_pool!(db, p => sqlx::query_as(select)
        .bind(&row.format)
        .bind(row.role())
        .bind(&identity)
        .bind(project)
        .fetch_optional(p)
        .await)?;
    Ok(match holder {
        Some((sha,)) if sha != row.sha256 => Claim::Lost(sha),
        _ => Claim::Held { new: false },
    })
}

/// Undoes a claim [`claim`] made for `row`'s file in `project` (the file was then not
/// stored).
pub async fn release(db: &Db, row: &BinaryRow, project: &str) -> Result<(), StoreError> {
    let Some(identity) = row.identity() else {
        return Ok(());
    };
    let sql = "DELETE FROM binary_claims WHERE format = $1 AND role = $2 AND identity = $3 \
               AND sha256 = $4 AND project = $5";
    crate::on_pool!(db, p => sqlx::query(sql)
        .bind(&row.format)
        .bind(row.role())
        .bind(&identity)
        .bind(&row.sha256)
        .bind(project)
        .execute(p)
        .await
        .map(|_| ()))?;
    Ok(())
}

/// The binary with this content hash.
pub async fn by_sha256(db: &Db, sha256: &str) -> Result<Option<BinaryRow>, StoreError> {
    let sql = format!("SELECT {COLUMNS} FROM binaries WHERE sha256 = $1");
    Ok(
        crate::on_pool!(db, p => sqlx::query_as::<_, BinaryRow>(sqlx::AssertSqlSafe(sql.as_str()))
        .bind(sha256)
        .fetch_optional(p)
        .await)?,
    )
}

/// Every file uploaded for a build-id, oldest first.
pub async fn by_build_id(db: &Db, build_id: &str) -> Result<Vec<BinaryRow>, StoreError> {
    let sql =
        format!("SELECT {COLUMNS} FROM binaries WHERE build_id = $1 ORDER BY uploaded_at, sha256");
    Ok(
        crate::on_pool!(db, p => sqlx::query_as::<_, BinaryRow>(sqlx::AssertSqlSafe(sql.as_str()))
        .bind(build_id)
        .fetch_all(p)
        .await)?,
    )
}

/// The answer of a lookup by build-ids before its rows: every build-id, no files.
fn no_files(build_ids: &[&str]) -> std::collections::HashMap<String, Vec<BinaryRow>> {
    build_ids
        .iter()
        .map(|id| (id.to_string(), Vec::new()))
        .collect()
}

/// [`by_build_id`] of every build-id of `build_ids` in one query (a job looks up all of
/// its dump's modules at once: one round trip, not one per module). Every build-id asked
/// is a key of the answer, with no files when none was uploaded.
pub async fn by_build_ids(
    db: &Db,
    build_ids: &[&str],
) -> Result<std::collections::HashMap<String, Vec<BinaryRow>>, StoreError> {
    let mut files = no_files(build_ids);
    if build_ids.is_empty() {
        return Ok(files);
    }
    let list = serde_json::to_string(build_ids).map_err(|e| StoreError::Corrupt(e.to_string()))?;
    let sql = format!(
        "SELECT {COLUMNS} FROM binaries WHERE build_id IN ({}) \
         ORDER BY uploaded_at, sha256",
        db.json_strings("$1")
    );
    let rows: Vec<BinaryRow> = crate::on_pool!(db, p => sqlx::query_as::<_, BinaryRow>(
        sqlx::AssertSqlSafe(sql.as_str()))
        .bind(&list)
        .fetch_all(p)
        .await)?;
    for row in rows {
        if let Some(same) = files.get_mut(&row.build_id) {
            same.push(row);
        }
    }
    Ok(files)
}

/// The Windows images with code id `code_id` (upper-case) uploaded under the name `name`
/// (compared without case, as Windows names files; any of an image's names), oldest
/// first, as `sees` sees them.
pub async fn by_code_id(
    db: &Db,
    name: &str,
    code_id: &str,
    sees: Sees<'_>,
) -> Result<Vec<BinaryRow>, StoreError> {
    let same = |n: &str| {
        n.rsplit(['/', '\\'])
            .next()
            .unwrap_or(n)
            .eq_ignore_ascii_case(name)
    };
    let mut out = Vec::new();
    for row in with_code_id(db, code_id).await? {
        if row.is_breakpad() {
            continue;
        }
        if row.file_name.as_deref().is_some_and(same)
            || names_of(db, &row.sha256).await?.iter().any(|n| same(n))
        {
            out.push(row);
        }
    }
    visible(db, sees, out).await
}

/// Records that the file `sha256` was uploaded under `name`; whether the name is new to it.
pub async fn add_name(db: &Db, sha256: &str, name: &str) -> Result<bool, StoreError> {
    let sql = "INSERT INTO binary_names (sha256, name) VALUES ($1, $2) ON CONFLICT DO NOTHING";
    let done = crate::on_pool!(db, p => sqlx::query(sql)
        .bind(sha256)
        .bind(name)
        .execute(p)
        .await
        .map(|r| r.rows_affected()))?;
    Ok(done == 1)
}

/// Every name the file `sha256` was uploaded under (see [`add_name`]), in order.
pub async fn names_of(db: &Db, sha256: &str) -> Result<Vec<String>, StoreError> {
    let sql = "SELECT name FROM binary_names WHERE sha256 = $1 ORDER BY name";
    let rows: Vec<(String,)> = crate::on_pool!(db, p => sqlx::query_as(sql)
        .bind(sha256)
        .fetch_all(p)
        .await)?;
    Ok(rows.into_iter().map(|(n,)| n).collect())
}

/// Every file with code id `code_id` (upper-case), oldest first.
async fn with_code_id(db: &Db, code_id: &str) -> Result<Vec<BinaryRow>, StoreError> {
    let sql =
        format!("SELECT {COLUMNS} FROM binaries WHERE code_id = $1 ORDER BY uploaded_at, sha256");
    Ok(
        crate::on_pool!(db, p => sqlx::query_as::<_, BinaryRow>(sqlx::AssertSqlSafe(sql.as_str()))
        .bind(code_id)
        .fetch_all(p)
        .await)?,
    )
}

/// The first Windows `.sym` file uploaded whose `INFO CODE_ID` record names the image
/// `name` (compared without case) of code id `code_id` (upper-case) that `sees` sees:
/// first upload wins.
pub async fn sym_by_code_id(
    db: &Db,
    name: &str,
    code_id: &str,
    sees: Sees<'_>,
) -> Result<Option<BinaryRow>, StoreError> {
    let rows = visible(db, sees, with_code_id(db, code_id).await?).await?;
    Ok(rows.into_iter().find(|r| {
        r.is_breakpad()
            && r.code_file
                .as_deref()
                .is_some_and(|f| f.eq_ignore_ascii_case(name))
    }))
}

/// Every file uploaded for a debug-id (upper-case), oldest first.
pub async fn by_debug_id(db: &Db, debug_id: &str) -> Result<Vec<BinaryRow>, StoreError> {
    let sql =
        format!("SELECT {COLUMNS} FROM binaries WHERE debug_id = $1 ORDER BY uploaded_at, sha256");
    Ok(
        crate::on_pool!(db, p => sqlx::query_as::<_, BinaryRow>(sqlx::AssertSqlSafe(sql.as_str()))
        .bind(debug_id)
        .fetch_all(p)
        .await)?,
    )
}

/// The most recent binaries, newest first (listing without a filter).
pub async fn recent(db: &Db, limit: i64) -> Result<Vec<BinaryRow>, StoreError> {
    recent_in(db, Sees::Every, limit).await
}

/// The most recent binaries `sees` sees, newest first.
pub async fn recent_in(db: &Db, sees: Sees<'_>, limit: i64) -> Result<Vec<BinaryRow>, StoreError> {
    let project = match sees {
        Sees::Every => None,
        Sees::Project(p) => Some(p),
    };
    let sql = format!(
        "SELECT {COLUMNS} FROM binaries WHERE CAST($2 AS TEXT) IS NULL OR sha256 IN \
         (SELECT sha256 FROM binary_projects WHERE project = $2 OR project = '{SHARED}') \
         ORDER BY uploaded_at DESC, sha256 LIMIT $1"
    );
    let rows = crate::on_pool!(db, p => sqlx::query_as::<_, BinaryRow>(sqlx::AssertSqlSafe(sql.as_str()))
        .bind(limit)
        .bind(project)
        .fetch_all(p)
        .await)?;
    visible(db, sees, rows).await
}

#[cfg(test)]
mod tests {
    use super::BinaryRow;

    fn sym(sha: &str, debug_id: &str, code_file: &str) -> BinaryRow {
        BinaryRow {
            sha256: sha.repeat(32),
            build_id: String::new(),
            arch: Some("x86_64".into()),
            kind: engine::identify::KIND_BREAKPAD.into(),
            file_name: None,
            size: 5,
            sections: String::new(),
            uploaded_at: 1,
            debug_id: Some(debug_id.into()),
            format: "breakpad".into(),
            source: None,
            code_id: Some("5F3A2B1C1000".into()),
            code_file: Some(code_file.into()),
        }
    }

    fn elf(sha: &str, build_id: &str) -> BinaryRow {
        BinaryRow {
            sha256: sha.repeat(32),
            build_id: build_id.into(),
            arch: Some("x86_64".into()),
            kind: "executable".into(),
            file_name: None,
            size: 5,
            sections: "text,symtab,debug_info".into(),
            uploaded_at: 1,
            debug_id: None,
            format: "elf".into(),
            source: None,
            code_id: None,
            code_file: None,
        }
    }

    /// A project sees its own files and the shared ones, never another project's; its
    /// own file of a build-id wins over a shared one, the first shared one over a later.
    #[test]
    fn a_project_sees_its_own_then_the_shared_files() {
        use super::{pick_visible, SHARED};
        let holders = |list: &[(&str, &[&str])]| {
            list.iter()
                .map(|(sha, ps)| (sha.repeat(32), ps.iter().map(|p| p.to_string()).collect()))
                .collect::<std::collections::HashMap<String, Vec<String>>>()
        };
        let rows = vec![
            elf("b1", "aa"),
            elf("a1", "aa"),
            elf("s1", "bb"),
            elf("s2", "bb"),
        ];
        let h = holders(&[
            ("b1", &["team-b"]),
            ("a1", &["team-a"]),
            ("s1", &["default", SHARED]),
            ("s2", &[SHARED]),
        ]);
        let shas = |rows: Vec<BinaryRow>| {
            rows.into_iter()
                .map(|r| r.sha256[..2].to_string())
                .collect::<Vec<_>>()
        };
        assert_eq!(shas(pick_visible(&h, "team-a", rows.clone())), ["a1", "s1"]);
        assert_eq!(shas(pick_visible(&h, "team-b", rows.clone())), ["b1", "s1"]);
        assert_eq!(shas(pick_visible(&h, "other", rows.clone())), ["s1"]);
        // a shared file of the build-id a project holds a file of: the project's own wins
        let h2 = holders(&[("b1", &["team-b"]), ("a1", &[SHARED])]);
        let rows2 = vec![elf("a1", "aa"), elf("b1", "aa")];
        assert_eq!(shas(pick_visible(&h2, "team-b", rows2.clone())), ["b1"]);
        assert_eq!(shas(pick_visible(&h2, "team-a", rows2)), ["a1"]);
    }

    /// dump_syms gives every image without a CodeView record (wine's DLLs) the debug-id
    /// of zeros: their `.sym` files are told apart by the image they describe, and only a
    /// different file for the same image contests one.
    #[test]
    fn sym_files_of_zero_debug_ids_are_known_by_their_image() {
        let zeros = "0".repeat(33);
        let kernel32 = sym("a1", &zeros, "kernel32.dll");
        let ntdll = sym("a2", &zeros, "ntdll.dll");
        let kernel32_again = sym("a3", &zeros, "KERNEL32.dll");
        assert!(!kernel32.contests(&ntdll));
        assert!(kernel32.contests(&kernel32_again));
        let real = "5A9832E5287241C1838ED98914E9B7FF1";
        assert!(sym("b1", real, "a.dll").contests(&sym("b2", real, "b.dll")));
    }
}
