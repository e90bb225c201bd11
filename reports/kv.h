/*
 * kv.h - the one renderer of key/value reports (a policy's report,
 * sim/report.h): as the result's "policy_report" JSON object, as the run
 * table's packed "key: value" lines, and as the HTML report's rows; and back
 * from JSON, for a report made from saved results.
 *
 * Each surface shows a value by its unit, in its own style:
 *
 *   unit    value   run table (text)            HTML
 *   bytes   int     "1.50 GiB"                  "1.50 GiB" ("0 B")
 *   ns      int     "12.35 ms"                  "12.345 ms"
 *   ratio   real    "91.3 %"                    "0.913 (91.3 %)" (0..1 only)
 *   plain   int     "1234"                      "1,234"
 *   plain   real    "%.4g"                      4 decimals at most
 *   bool            "true" / "false"            "yes" / "no"
 *   null            "null"                      "—"
 *
 * A saved result carries no units: a policy report read back from JSON
 * (gm_report_from_json) takes them from the key, by the naming rule of
 * gmsim-result/1 (STYLE: units in names): an integer whose key ends in
 * "_bytes" is bytes, a number whose key ends in "_ns" is nanoseconds, a
 * real whose key names a precision, recall, accuracy, rate, ratio, fraction
 * or share is a ratio; anything else is plain. The key is the last part of
 * a dotted name ("group.key"): that is the rule the HTML report has always
 * applied, so pages made from old results read as before.
 */
#ifndef GM_KV_H
#define GM_KV_H

#include <jansson.h>
#include <stdio.h>

#include "base/strbuf.h"
#include "sim/report.h"

/* The report as a JSON object ("group.key" items nested in "group"); NULL
 * for a NULL report. */
json_t *gm_report_json(const gm_report *r);

/* A JSON object (a saved "policy_report") as a report: nested objects
 * flattened to dotted keys (four levels; deeper values and arrays become
 * GM_KV_RAW), units from the naming rule above. NULL when obj is not an
 * object or memory runs out. */
gm_report *gm_report_from_json(json_t *obj);

/* The run table's lines: "key: value" items packed on lines of at most 100
 * columns, indented by four, at most 12 lines, then "... N more (all in
 * --json)". Prints nothing for an empty report. */
void gm_report_print(FILE *f, const gm_report *r);

/* The HTML report's rows: <dt>key</dt><dd>value</dd> per item, escaped. */
void gm_report_html(gm_strbuf *b, const gm_report *r);
/* One saved value (NULL: absent) as an HTML row shows it, its unit from
 * name by the naming rule above. */
void gm_report_html_value(gm_strbuf *b, const char *name, json_t *v);

/* A key as people read it (the HTML rows): a known policy key's label
 * ("period_ns" -> "iteration period learned"), else its words without the
 * unit suffix; dotted parts joined with ": ". Escaped. */
void gm_report_html_label(gm_strbuf *b, const char *key);

#endif
