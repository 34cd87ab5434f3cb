"""The cue words of `features` in French, Spanish, German, Portuguese, Italian, Russian, Chinese and
Japanese, read only when a request is not in English.

Without them a request lost its cues in translation: a French "résume ce texte" missed the -1.0 of a
routine ask and a German "beweise, dass" the +0.5 of a proof, so inside one of these languages the
router ranked below prompt length alone (`docs/routing/classifier-experiments.md`, version 1.4).
Each list is the
English list's meaning, not its letters: common inflections (infinitive, imperative, noun) of each
word, and none that is also an everyday word of English, of code or of the language itself ("sin",
"alter", "mayor", "se", "prova", "ottimo": sine, ALTER TABLE, a city's mayor, a pronoun, an exam,
"great"). Chinese and Japanese are not split into words: their cues are looked for as substrings.
"""

from __future__ import annotations

CJK_LEADS = bytes(range(0xE3, 0xEA))  # UTF-8 lead bytes of U+3000-U+9FFF: CJK marks, kana, Han
CUE_KINDS = ("reasoning", "expert", "routine", "sequence", "conditional", "quantity", "constraint")


def _words(text: str) -> frozenset[bytes]:
    return frozenset(text.encode().split())


def _phrases(text: str) -> tuple[tuple[tuple[bytes, bytes], ...], tuple[tuple[str, str], ...]]:
    """Phrases of words, each behind its first word, and Chinese and Japanese phrases, each behind
    its first character: a phrase is looked for only when its key is in the text, which spares
    most of the scans."""
    phrases = text.split("|")
    spaced = tuple((p.split()[0].encode(), p.encode()) for p in phrases if " " in p or p.isascii())
    joined = tuple((p[0], p) for p in phrases if " " not in p and not p.isascii())
    return spaced, joined


_WORDS: dict[str, frozenset[bytes]] = {
    "reasoning": _words(
        "justifier justifie justifiez expliquer explique expliquez pourquoi analyser analysez évaluer "
        "évalue évaluez comparer comparez raisonnement raisonner déduire implique donc calculer calcule "
        "calculez déterminer détermine déterminez estimer estimez critiquer argumenter hypothèse étape "
        "étapes stratégie planifier diagnostiquer "  # French
        "justificar justifica explicar explica explícame explique analizar analiza evaluar evalúa "
        "comparar compara razonamiento razona deducir implica calcular calcula calcúlame determinar "
        "determina estimar estima criticar argumentar hipótesis paso pasos estrategia planificar "
        "diagnosticar "  # Spanish
        "begründen begründe erklären erkläre erklär warum analysieren analysiere bewerten "
        "bewerte vergleichen vergleiche folgern daher deshalb berechnen berechne bestimmen bestimme "
        "schätzen schätze beurteilen beurteile argumentieren hypothese schritt schritte strategie "
        "planen diagnostizieren "  # German
        "justifique explicar explique analisar analise avaliar avalie raciocínio deduzir calcular "
        "calcule determinar estimar estime argumentar hipótese passo passos estratégia "
        "planejar diagnosticar "  # Portuguese
        "giustificare giustifica spiegare spiega spiegami perché analizzare analizza valutare "
        "confrontare confronta ragionamento dedurre quindi calcolare calcola determinare determina "
        "stimare stima ipotesi passaggi passi strategia pianificare diagnosticare "  # Italian
        "обоснуй обосновать объясни объяснить объясните почему проанализируй анализ анализировать "
        "оцени оценить сравни сравнить рассуждение следовательно поэтому посчитай посчитать вычисли "
        "вычислить рассчитай рассчитать определи определить шаг шаги пошагово стратегия спланируй "
        "диагностировать"  # Russian
    ),
    "expert": _words(
        "prouver prouve prouvez démontrer démontre démontrez démonstration preuve dériver théorème "
        "lemme corollaire rigoureux rigoureuse rigoureusement récurrence contre-exemple asymptotique "
        "optimale optimalité concevoir conception scalabilité distribué distribuée "
        "réplication interblocage compromis implémenter implémente implémentez optimiser "
        "optimisez refactoriser "  # French
        "demostrar demuestra demuestre demostración derivar teorema corolario riguroso rigurosa "
        "rigurosamente inducción contraejemplo invariante asintótico asintótica óptimo óptima "
        "optimalidad diseñar diseña diseño arquitectura escalable escalabilidad distribuido "
        "distribuida replicación concurrencia concurrente interbloqueo implementar "
        "implementa optimizar optimiza refactorizar "  # Spanish
        "beweisen beweise beweis herleiten herleitung korollar induktion gegenbeispiel invariante "
        "asymptotisch optimalität entwerfen entwirf architektur skalierbar skalierbarkeit "
        "replikation nebenläufigkeit nebenläufig parallelität grenzfälle randfälle zielkonflikt "
        "abwägung abwägungen implementieren implementiere optimieren optimiere "
        "refaktorisieren "  # German
        "provar demonstrar demonstre demonstração teorema corolário rigoroso rigorosa "
        "rigorosamente indução contraexemplo assintótico assintótica otimalidade projetar projete "
        "arquitetura escalável escalabilidade distribuído distribuída replicação concorrência "
        "concorrente implemente otimizar otimize refatorar "  # Portuguese
        "dimostrare dimostra dimostrazione derivare corollario induzione controesempio asintotico "
        "asintotica ottimale ottimalità progettare progetta architettura scalabile scalabilità "
        "distribuito distribuita replicazione concorrenza compromesso implementare ottimizzare "
        "ottimizza rifattorizzare "  # Italian
        "докажи доказать доказательство докажите теорема теорему лемма "
        "индукция индукцией контрпример инвариант асимптотика асимптотически оптимальный оптимальное "
        "оптимально спроектируй спроектировать проектирование архитектура архитектуру масштабируемый "
        "масштабируемость распределённый распределенный распределённая распределенная "
        "репликация конкурентность многопоточность дедлок взаимоблокировка мьютекс компромисс "
        "реализуй оптимизируй оптимизировать рефакторинг"  # Russian
    ),
    "routine": _words(
        "résumer résume résumez résumé traduire traduis traduisez traduction extraire extrais "
        "extrayez reformater relire relis fautes orthographe grammaire réécrire réécris reformuler "
        "reformule paraphraser classer classifier catégoriser convertir convertis raccourcir "
        "raccourcis "  # French
        "resumir resúmeme resumen traducir traduce tradúceme traducción extraer extrae reformatear "
        "ortografía gramática reescribir reescribe reformular reformula parafrasear clasificar "
        "clasifica categorizar convierte acortar acorta "  # Spanish
        "zusammenfassen zusammenfassung fasse übersetzen übersetze übersetz übersetzung extrahieren "
        "extrahiere umformatieren korrekturlesen rechtschreibung grammatik tippfehler umschreiben "
        "umformulieren formuliere paraphrasieren klassifizieren klassifiziere kategorisieren "
        "konvertieren konvertiere umwandeln kürzen kürze "  # German
        "resuma resumo traduzir traduza tradução extrair extraia reformatar ortografia reescrever "
        "reescreva reformule parafrasear classificar classifique converter converta encurtar "
        "encurte "  # Portuguese
        "riassumere riassumi riassunto tradurre traduci traduzione estrarre estrai riformattare "
        "grammatica riscrivere riscrivi riformulare riformula parafrasare classificare categorizzare "
        "convertire converti accorciare accorcia "  # Italian
        "перескажи резюме резюмируй суммируй перевести переведи переведите извлеки извлечь "
        "переформатируй вычитай опечатки орфография грамматика перепиши переписать перефразируй "
        "переформулируй классифицируй конвертируй преобразуй сократи сократить"  # Russian
    ),
    "sequence": _words(
        "abord ensuite puis enfin finalement après avant premièrement deuxièmement "  # French
        "primero luego después antes hasta entonces "  # Spanish
        "zuerst erstens zweitens dann danach anschließend schließlich zuletzt bevor nachdem "  # German
        "primeiro depois então até "  # Portuguese
        "prima poi dopo infine "  # Italian
        "сначала во-первых во-вторых затем потом далее наконец после перед"  # Russian
    ),
    "conditional": _words(
        "supposons supposer sinon sauf "  # French
        "supongamos supón suponiendo asumiendo salvo excepto "  # Spanish
        "wenn falls angenommen sofern sonst außer "  # German
        "caso supondo suponha assumindo senão exceto "  # Portuguese
        "supponiamo supponi supponendo altrimenti tranne "  # Italian
        "если допустим предположим иначе кроме"  # Russian
    ),
    "quantity": _words(
        "moitié fois moyenne chaque restant restants restantes taux pourcentage âge âgé "  # French
        "doble mitad veces promedio cada restante restantes tasa porcentaje proporción edad "  # Spanish
        "doppelt hälfte dreifach durchschnitt durchschnittlich jede jeder jedes übrig restlichen "
        "insgesamt verhältnis prozent prozentsatz anteil älter jünger "  # German
        "dobro metade triplo vezes média taxa porcentagem percentual proporção idade "  # Portuguese
        "doppio metà triplo volte ogni ciascuno rimanente rimanenti totale tasso percentuale "
        "proporzione età "  # Italian
        "вдвое половина втрое среднее средний каждый каждого каждую остаток оставшиеся итого "
        "процент процентов доля соотношение возраст старше младше"  # Russian
    ),
    "constraint": _words(
        "doit dois devez faut exactement seulement uniquement jamais toujours sans obligatoire "
        "obligatoirement strictement limite "  # French
        "debe debes deben exactamente solo solamente únicamente nunca siempre asegúrate obligatorio "
        "estrictamente máximo mínimo límite "  # Spanish
        "muss müssen musst soll sollte genau nur nie niemals immer ohne sicherstellen erforderlich "
        "zwingend strikt maximal höchstens mindestens grenze innerhalb "  # German
        "deve devem exatamente apenas somente sempre garanta obrigatório estritamente "  # Portuguese
        "devi devono esattamente soltanto mai senza assicurati obbligatorio massimo "
        "minimo limite entro "  # Italian
        "должен должна должно должны обязательно ровно только никогда всегда без убедись "
        "максимум минимум лимит ограничение"  # Russian
    ),
}

# Phrases of the Latin and Cyrillic languages, and the Chinese and Japanese cues, looked for in the
# lower-cased text. Chinese and Japanese share many characters; one list serves both.
_PHRASES: dict[str, tuple[tuple[tuple[bytes, bytes], ...], tuple[tuple[str, str], ...]]] = {
    "reasoning": _phrases(
        "étape par étape|paso a paso|por qué|schritt für schritt|passo a passo|por que|"
        "passo dopo passo|解释|为什么|为何|分析|评估|对比|推断|计算一下|算一下|计算出|估算|"
        "论证|逐步|一步一步|步骤|策略|排查|说明原因|説明|なぜ|評価|比較|推論|計算|見積|仮説|"
        "ステップ|手順|戦略|デバッグ|診断"
    ),
    "expert": _phrases(
        "cas limites|casos límite|casi limite|证明|証明|推导|定理|引理|严格|厳密|归纳法|"
        "帰納法|反例|不变量|不変条件|渐近|漸近|最优|最適|设计|設計|架构|アーキテクチャ|可扩展|"
        "スケーラブル|分布式|分散|并发|並行|线程安全|スレッドセーフ|死锁|デッドロック|互斥|"
        "权衡|トレードオフ|実装|优化|重构|リファクタ|竞态|競合状態|边界情况|エッジケース"
    ),
    "routine": _phrases(
        "总结|概括|摘要|要約|まとめ|翻译|翻訳|译成|提取|抽出|格式化|校对|校閲|"
        "错别字|誤字|改写|書き直|改述|言い換え|分类|分類|转换|変換|短く"
    ),
    "sequence": _phrases("首先|然后|接着|最后|之后|之前|まず|次に|最後に|その後"),
    "conditional": _phrases("à moins|a menos|es sei denn|a meno|如果|假如|假设|否则|除非|もし|仮に|場合"),
    "quantity": _phrases(
        "deux fois|plus âgé|两倍|一半|平均|剩余|总共|合计|比例|比率|百分之|百分比|半分|残り|合計|割合|倍以上"
    ),
    "constraint": _phrases(
        "au moins|au plus|plus de|moins de|al menos|como máximo|más de|menos de|pelo menos|"
        "no máximo|mais de|menos que|almeno|al massimo|più di|meno di|не более|не менее|"
        "как минимум|в пределах|必须|应该|恰好|只能|不要|确保|务必|最多|最少|至少|不超过|以内|"
        "要求|必ず|のみ|しないで|禁止|常に"
    ),
}
# Where `features` splits words; here an apostrophe splits them too.
WORD_PUNCTUATION = b'!"#$%&()*+,./:;<=>?@[\\]^`{|}~\r\n\t'
_TO_SPACE = bytes.maketrans(WORD_PUNCTUATION + b"'", b" " * (len(WORD_PUNCTUATION) + 1))
# A typographic apostrophe, guillemets, German and English curly quotes, Spanish inverted marks.
_MARKS = tuple(mark.encode() for mark in "\u2019\u00ab\u00bb\u201e\u201c\u201d\u00bf\u00a1")


def foreign_cues(sample: str, cjk: bool) -> tuple[int, ...]:
    """Distinct cue words and phrases of each kind in `CUE_KINDS` order, in the eight languages;
    the Chinese and Japanese ones only when the sample has their characters (`cjk`, which the
    caller has counted). Apostrophes split words here ("d'abord", "l'analyse"), unlike in English
    ("don't")."""
    low = sample.lower()  # unlike bytes.lower(), Cyrillic and accented capitals too
    text = low.encode("utf-8", "replace")
    spaced = text.translate(_TO_SPACE)
    for mark in _MARKS:
        if mark in spaced:
            spaced = spaced.replace(mark, b" ")
    words = set(spaced.split())
    chars = set(low) if cjk else set()
    counts = []
    for kind in CUE_KINDS:
        spaced_phrases, joined_phrases = _PHRASES[kind]
        found = len(words & _WORDS[kind])
        found += sum(1 for key, phrase in spaced_phrases if key in words and phrase in text)
        if chars:
            found += sum(1 for key, phrase in joined_phrases if key in chars and phrase in low)
        counts.append(found)
    return tuple(counts)
