//! An error and its causes on one line, for logs and exit messages.

/// The error's text, then each cause's that the text so far does not already say, `: `-separated
/// (most errors repeat their source in their own message; a transport error's own text, such as
/// "client error (Connect)", says only in its causes that the API server refused the connection).
pub fn one_line(e: &dyn std::error::Error) -> String {
    let mut line = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        let text = c.to_string();
        if !line.contains(&text) {
            line.push_str(": ");
            line.push_str(&text);
        }
        cause = c.source();
    }
    line
}

#[cfg(test)]
mod tests {
    use super::one_line;

    #[derive(Debug, thiserror::Error)]
    #[error("reading pods: {0}")]
    struct Repeats(#[source] std::io::Error);

    #[derive(Debug, thiserror::Error)]
    #[error("loading the cluster")]
    struct Wraps(#[source] Repeats);

    #[test]
    fn each_cause_is_said_once() {
        let e = Wraps(Repeats(std::io::Error::other("connection refused")));
        assert_eq!(one_line(&e), "loading the cluster: reading pods: connection refused");
    }
}
