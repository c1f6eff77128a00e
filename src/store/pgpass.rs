//! The password a PostgreSQL URL leaves out, looked up where sqlx looks for
//! it, so that the lane (`pg_lane`, another driver) signs in wherever sqlx's
//! pool does: `PGPASSWORD`, then the password file (`PGPASSFILE`, else
//! `~/.pgpass`; lines `host:port:database:user:password`, `*` matching
//! anything, `\` escaping `:` and `\`). As libpq and sqlx do, a file others
//! may read is ignored.

use std::path::PathBuf;

/// Who the password is for.
pub(crate) struct Login<'a> {
    pub host: &'a str,
    pub port: u16,
    pub database: Option<&'a str>,
    pub user: &'a str,
}

/// `PGPASSWORD`, or the password file's first line for `login`.
pub(crate) fn password(login: &Login<'_>) -> Option<String> {
    if let Ok(password) = std::env::var("PGPASSWORD") {
        return Some(password);
    }
    let files = [
        std::env::var_os("PGPASSFILE").map(PathBuf::from),
        std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".pgpass")),
    ];
    files
        .into_iter()
        .flatten()
        .find_map(|file| from_file(&file, login))
}

fn from_file(file: &std::path::Path, login: &Login<'_>) -> Option<String> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(file).ok()?.permissions().mode();
        if mode & 0o077 != 0 {
            tracing::warn!(file = %file.display(), "ignoring a PostgreSQL password file others may read");
            return None;
        }
    }
    from_lines(&std::fs::read_to_string(file).ok()?, login)
}

fn from_lines(text: &str, login: &Login<'_>) -> Option<String> {
    let port = login.port.to_string();
    let wanted = [
        login.host,
        &port,
        login.database.unwrap_or(login.user),
        login.user,
    ];
    text.lines()
        .filter(|line| !line.starts_with('#'))
        .find_map(|line| {
            let fields = fields(line);
            let [host, port, database, user, password] = fields.as_slice() else {
                return None;
            };
            let matches = [host, port, database, user]
                .into_iter()
                .zip(wanted)
                .all(|(field, wanted)| field == "*" || field == wanted);
            matches.then(|| password.clone())
        })
}

/// A line's fields, split at unescaped `:`.
fn fields(line: &str) -> Vec<String> {
    let mut fields = Vec::new();
    let mut field = String::new();
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => field.extend(chars.next()),
            ':' => fields.push(std::mem::take(&mut field)),
            c => field.push(c),
        }
    }
    fields.push(field);
    fields
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_password_line_is_found_as_libpq_finds_it() {
        let login = Login {
            host: "db.example",
            port: 5432,
            database: Some("warden"),
            user: "app",
        };
        let text = "# comment\n\
                    other.example:5432:warden:app:nope\n\
                    db.example:5432:*:app:se\\:cr\\\\et\n\
                    *:*:*:*:fallback\n";
        assert_eq!(from_lines(text, &login).as_deref(), Some("se:cr\\et"));
        let elsewhere = Login { host: "x", ..login };
        assert_eq!(from_lines(text, &elsewhere).as_deref(), Some("fallback"));
        assert_eq!(from_lines("db.example:5432:warden:app\n", &login), None);
    }
}
